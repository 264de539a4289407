"""split_bundle / join_volumes: media faults are named, joins resume."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bundle import (
    FormatError,
    SecretKey,
    SignatureError,
    TrustPolicy,
    VolumeError,
    join_volumes,
    split_bundle,
)


@pytest.fixture
def volumes(built: Path, key: SecretKey, tmp_path: Path) -> Path:
    out = tmp_path / "vol"
    out.mkdir()
    return split_bundle(built, out, 8192, [key])


def _parts(index: Path) -> list[Path]:
    return sorted(index.parent.glob("full.abhed.[0-9]*"))


def test_split_and_join_round_trip(volumes: Path, built: Path, trust: TrustPolicy,
                                   tmp_path: Path) -> None:
    parts = _parts(volumes)
    assert len(parts) == -(-built.stat().st_size // (8192)) >= 3
    result = join_volumes(volumes, tmp_path / "j.abhed", trust)
    assert (tmp_path / "j.abhed").read_bytes() == built.read_bytes()
    assert result.resumed_parts == 0


def test_missing_part_then_resume_from_another_medium(volumes: Path, built: Path,
                                                      trust: TrustPolicy, tmp_path: Path) -> None:
    medium2 = tmp_path / "medium2"
    medium2.mkdir()
    parts = _parts(volumes)
    for p in parts[2:]:
        shutil.move(p, medium2 / p.name)
    with pytest.raises(VolumeError, match=f"part 3 of {len(parts)} .* is missing.*resumes "
                                          "after part 2"):
        join_volumes(volumes, tmp_path / "j.abhed", trust)
    assert (tmp_path / "j.abhed.partial").stat().st_size == 2 * 8192
    result = join_volumes(volumes, tmp_path / "j.abhed", trust, search_dirs=[medium2])
    assert result.resumed_parts == 2
    assert (tmp_path / "j.abhed").read_bytes() == built.read_bytes()


def test_reordered_duplicated_corrupt_and_foreign_parts_are_named(
        volumes: Path, trust: TrustPolicy, tmp_path: Path, key: SecretKey) -> None:
    parts = _parts(volumes)
    a, b = parts[0], parts[1]
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(b_bytes)
    b.write_bytes(a_bytes)
    with pytest.raises(VolumeError, match="holds part 2's bytes, not part 1's.*reordered"):
        join_volumes(volumes, tmp_path / "j1", trust)
    a.write_bytes(a_bytes)
    b.write_bytes(a_bytes)
    with pytest.raises(VolumeError, match="part 2 .*holds part 1's bytes.*duplicated"):
        join_volumes(volumes, tmp_path / "j2", trust)
    corrupt = bytearray(b_bytes)
    corrupt[100] ^= 1
    b.write_bytes(bytes(corrupt))
    with pytest.raises(VolumeError, match="part 2 .*corrupt or belongs to another bundle"):
        join_volumes(volumes, tmp_path / "j3", trust)
    # a part from another bundle's volume set, copied under this name
    other = tmp_path / "other.abhed"
    other.write_bytes(bytes(range(256)) * 128)
    (tmp_path / "ov").mkdir()
    oidx = split_bundle(other, tmp_path / "ov", 8192, [key])
    b.write_bytes(sorted(oidx.parent.glob("other.abhed.0*"))[1].read_bytes())
    with pytest.raises(VolumeError, match="part 2 .*belongs to another bundle"):
        join_volumes(volumes, tmp_path / "j4", trust)
    b.write_bytes(b_bytes)
    assert join_volumes(volumes, tmp_path / "j4", trust).resumed_parts == 1


def test_volume_index_must_be_signed_by_a_trusted_key(volumes: Path, tmp_path: Path,
                                                      trust: TrustPolicy) -> None:
    stranger = TrustPolicy(keys=(SecretKey.generate().public_key(),))
    with pytest.raises(SignatureError, match="volume index"):
        join_volumes(volumes, tmp_path / "j", stranger)
    raw = volumes.read_bytes()
    volumes.write_bytes(raw.replace(b'"part_size": 8192', b'"part_size": 8193'))
    with pytest.raises(SignatureError, match="altered"):
        join_volumes(volumes, tmp_path / "j", trust)
    Path(f"{volumes}.minisig").unlink()
    with pytest.raises(VolumeError, match="cannot read the volume index"):
        join_volumes(volumes, tmp_path / "j", stranger)


def test_malformed_index_even_if_signed_is_refused(tmp_path: Path, key: SecretKey,
                                                   trust: TrustPolicy) -> None:
    from bundle._trust import sign_set

    idx = tmp_path / "x.volumes.json"
    for raw in (b"{}", b'{"format": "abhed-volumes/1", "bundle": "../x", "size": 1, '
                b'"sha256": "' + b"0" * 64 + b'", "part_size": 1, "parts": [{"index": 1, '
                b'"name": "../../etc/passwd", "size": 1, "sha256": "' + b"0" * 64 + b'"}]}'):
        idx.write_bytes(raw)
        Path(f"{idx}.minisig").write_bytes(sign_set(raw, [key], "t"))
        with pytest.raises(FormatError):
            join_volumes(idx, tmp_path / "out", trust)


def test_split_refuses_bad_sizes_and_existing_parts(built: Path, key: SecretKey,
                                                    tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match="at least 1 byte"):
        split_bundle(built, tmp_path, 0, [key])
    with pytest.raises(VolumeError, match="choose another --size"):
        split_bundle(built, tmp_path, 1, [key])
    split_bundle(built, tmp_path, 1 << 20, [key])
    with pytest.raises(FileExistsError):
        split_bundle(built, tmp_path, 1 << 20, [key])
