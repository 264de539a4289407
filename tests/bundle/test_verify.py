"""verify_bundle: the round trip, and every way a bundle can be wrong."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle import (
    DigestMismatch,
    FormatError,
    RollbackRefused,
    SecretKey,
    SignatureError,
    StagingError,
    TrustPolicy,
    UnsafeMember,
    staged_name,
    verify_bundle,
)
from bundle._manifest import canonical_json, parse_manifest
from bundle._tar import TarReader

from .conftest import forge, manifest_for


def _offsets(path: Path) -> dict[str, tuple[int, int]]:
    out = {}
    with open(path, "rb") as f:
        reader = TarReader(f)
        while (h := reader.next_member()) is not None:
            out[h.name] = (h.offset, h.size)
            reader.skip()
    return out


def _flip(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x40]))


def test_round_trip_unpacks_every_member_with_its_content(built: Path, trust: TrustPolicy,
                                                         tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    result = verify_bundle(built, trust, stage_to=tmp_path / "stage",
                           progress=lambda d, t: seen.append((d, t)))
    m = result.manifest
    assert result.signers == (trust.keys[0].id_hex,) and not result.downgrade
    kinds = {c.kind for c in m.components}
    assert kinds == {"agent", "wheel", "vllm", "model", "image", "installer", "docs"}
    assert any(x.compression == "zstd" for x in m.members), "the model weights should compress"
    for member in m.members:
        data = (tmp_path / "stage" / staged_name(member)).read_bytes()
        assert hashlib.sha256(data).hexdigest() == member.content_sha256
    assert seen[-1] == (m.payload_size, m.payload_size)


@pytest.mark.slow
def test_staged_wheelhouse_installs_with_pip_offline(built: Path, trust: TrustPolicy,
                                                     tmp_path: Path) -> None:
    verify_bundle(built, trust, stage_to=tmp_path / "s")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
         "--disable-pip-version-check", "--target", str(tmp_path / "site"),
         *map(str, sorted((tmp_path / "s" / "wheels").glob("*.whl")))],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "beta" / "__init__.py").read_text() == "NAME = 'beta'\n"


@pytest.mark.parametrize("prefix", ["sbom", "agent/", "wheels/alpha", "wheels/vllm",
                                    "models/tiny/model", "models/tiny/config", "image/kernel",
                                    "image/rootfs", "installer/", "docs/"])
def test_one_flipped_byte_in_each_kind_of_member_is_named(
        prefix: str, copy_of: Callable[[], Path], trust: TrustPolicy, tmp_path: Path) -> None:
    path = copy_of()
    name, (offset, size) = next((n, v) for n, v in _offsets(path).items() if n.startswith(prefix))
    _flip(path, offset + size // 2)
    with pytest.raises(DigestMismatch, match="sha256|not valid zstd") as info:
        verify_bundle(path, trust, stage_to=tmp_path / "stage")
    assert info.value.member == name
    assert not (tmp_path / "stage").exists(), "staging must be removed on failure"


def test_flipped_manifest_or_signature_byte_fails_the_signature(
        copy_of: Callable[[], Path], trust: TrustPolicy) -> None:
    offsets = _offsets(path := copy_of())
    _flip(path, offsets["manifest.json"][0] + 40)
    with pytest.raises(SignatureError, match="altered"):
        verify_bundle(path, trust)
    path = copy_of()
    text = path.read_bytes()
    i = text.index(b"trusted comment: abhed-bundle") + len("trusted comment: ")
    _flip(path, i)
    with pytest.raises(SignatureError, match="trusted comment"):
        verify_bundle(path, trust)


def test_untrusted_key_and_stripped_signature_are_refused(built: Path, tmp_path: Path,
                                                          key: SecretKey) -> None:
    other = TrustPolicy(keys=(SecretKey.generate().public_key(),))
    with pytest.raises(SignatureError, match="not by a trusted key"):
        verify_bundle(built, other)
    head = _offsets(built)
    raw = built.read_bytes()
    manifest = raw[head["manifest.json"][0]:][:head["manifest.json"][1]]
    members = [(n, raw[o:o + s]) for n, (o, s) in head.items() if "manifest" not in n]
    stripped = forge(tmp_path / "s.abhed", manifest, members, [],
                     head=[("manifest.json", manifest)])
    with pytest.raises(FormatError, match="unsigned or its signature was stripped"):
        verify_bundle(stripped, TrustPolicy(keys=(key.public_key(),)))


def test_swapped_manifest_from_another_signed_bundle_is_refused(
        built: Path, trust: TrustPolicy, key: SecretKey, tmp_path: Path) -> None:
    """A genuinely signed manifest glued onto another bundle's payload."""
    other = forge(tmp_path / "o.abhed", manifest_for([("sbom.cdx.json", b"{}"),
                                                      ("docs/a", b"a")]),
                  [("sbom.cdx.json", b"{}"), ("docs/a", b"a")], [key])
    head = _offsets(other)
    raw = other.read_bytes()
    mine = built.read_bytes()
    heads = [(n, raw[o:o + s]) for n, (o, s) in head.items() if n.startswith("manifest")]
    payload = [(n, mine[o:o + s]) for n, (o, s) in _offsets(built).items()
               if not n.startswith("manifest")]
    swapped = forge(tmp_path / "sw.abhed", b"", payload, [], head=heads)
    # Same publisher, genuinely signed, but it describes other bytes: named at the first member.
    with pytest.raises(DigestMismatch, match="sbom.cdx.json"):
        verify_bundle(swapped, trust)


def test_replayed_older_version_is_refused_unless_downgrade_is_explicit(
        built: Path, trust: TrustPolicy) -> None:
    with pytest.raises(RollbackRefused, match="older than installed version 3") as info:
        verify_bundle(built, trust, installed_version=3)
    assert (info.value.offered, info.value.installed) == (2, 3)
    result = verify_bundle(built, trust, installed_version=3, allow_downgrade=True)
    assert result.downgrade
    assert not verify_bundle(built, trust, installed_version=2).downgrade


@pytest.mark.parametrize("fraction", [0.0001, 0.01, 0.3, 0.6, 0.9, 0.99999])
def test_truncated_bundle_is_refused(fraction: float, copy_of: Callable[[], Path],
                                     trust: TrustPolicy, tmp_path: Path) -> None:
    path = copy_of()
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(int(size * fraction))
    with pytest.raises(FormatError, match="ends|truncated|early"):
        verify_bundle(path, trust, stage_to=tmp_path / "st")
    assert not (tmp_path / "st").exists()


def _members(n: int = 3) -> list[tuple[str, bytes]]:
    return [("sbom.cdx.json", b"{}")] + [(f"docs/f{i}", bytes([i]) * 100) for i in range(n)]


def test_wrong_order_extra_duplicate_and_missing_members(tmp_path: Path, key: SecretKey,
                                                         trust: TrustPolicy) -> None:
    ms = _members()
    man = manifest_for(ms)
    cases = {
        "comes where": ms[:1] + [ms[2], ms[1], ms[3]],
        "not in the signed manifest": ms + [("docs/extra", b"e")],
        "appears twice": ms + [ms[1]],
        "ends before member": ms[:-1],
    }
    for match, members in cases.items():
        path = forge(tmp_path / "x.abhed", man, members, [key])
        with pytest.raises(FormatError, match=match):
            verify_bundle(path, trust)
    dup = ms[:2] + [ms[1]] + ms[2:]
    with pytest.raises(FormatError, match="appears twice"):
        verify_bundle(forge(tmp_path / "d.abhed", man, dup, [key]), trust)
    first = forge(tmp_path / "f.abhed", b"", ms, [],
                  head=[("manifest.json.minisig", b"x"), ("manifest.json", b"{}")])
    with pytest.raises(FormatError, match="first member"):
        verify_bundle(first, trust)


def test_member_growing_past_its_declared_length_is_refused_before_reading(
        tmp_path: Path, key: SecretKey, trust: TrustPolicy) -> None:
    ms = _members()
    man = manifest_for(ms)
    grown = ms[:2] + [("docs/f1", ms[2][1] + b"more")] + ms[3:]
    with pytest.raises(DigestMismatch, match="the tar says 104 bytes, the manifest 100"):
        verify_bundle(forge(tmp_path / "g.abhed", man, grown, [key]), trust)


def test_zstd_member_unpacking_past_its_declared_size_is_cut_off(
        tmp_path: Path, key: SecretKey, trust: TrustPolicy) -> None:
    import zstandard

    bomb = zstandard.ZstdCompressor().compress(bytes(10_000_000))
    ms = [("sbom.cdx.json", b"{}"), ("docs/bomb.zst", bomb)]
    man = manifest_for(ms)
    entry = man["members"][1]  # type: ignore[index]
    entry.update(compression="zstd", content_size=1000,
                 content_sha256=hashlib.sha256(bytes(1000)).hexdigest())
    with pytest.raises(DigestMismatch, match="more than its declared 1000"):
        verify_bundle(forge(tmp_path / "b.abhed", man, ms, [key]), trust,
                      stage_to=tmp_path / "st")
    assert not (tmp_path / "st").exists()


def test_huge_manifest_is_refused_unread(tmp_path: Path, trust: TrustPolicy) -> None:
    from bundle._tar import member_header

    path = tmp_path / "huge.abhed"
    path.write_bytes(member_header("manifest.json", 9 * 2**30) + b"{")
    with pytest.raises(FormatError, match="over its 8388608-byte cap"):
        verify_bundle(path, trust)


def test_signed_manifest_with_unknown_fields_or_duplicate_keys_is_refused(
        tmp_path: Path, key: SecretKey, trust: TrustPolicy) -> None:
    ms = _members(1)
    man = manifest_for(ms)
    man["expires"] = "2030-01-01"
    with pytest.raises(FormatError, match="expires: unknown key(.|\n)*a newer builder"):
        verify_bundle(forge(tmp_path / "u.abhed", man, ms, [key]), trust)
    raw = canonical_json(manifest_for(ms)).replace(b'"version": 1', b'"version": 1, "version": 9')
    with pytest.raises(FormatError, match="duplicate key .version."):
        verify_bundle(forge(tmp_path / "k.abhed", raw, ms, [key]), trust)
    for bad in (b"[]", b"not json", b"\xff", b'{"format": "abhed-bundle/99"}',
                b"[" * 100_000 + b"]" * 100_000, b'{"format": "abhed-bundle/1", "version": NaN}'):
        with pytest.raises(FormatError):
            verify_bundle(forge(tmp_path / "b.abhed", bad, ms, [key]), trust)


@pytest.mark.parametrize("field,value,match", [
    ("name", "../evil", "bundle name"),
    ("version", 0, "version"),
    ("sbom", "docs/nope", "sbom"),
])
def test_manifest_field_checks(field: str, value: object, match: str) -> None:
    man = manifest_for(_members(1))
    man[field] = value
    with pytest.raises(FormatError, match=match):
        parse_manifest(canonical_json(man))


def test_manifest_member_names_are_checked_like_tar_names() -> None:
    for name in ("../evil", "DOCS/F0", "docs/f0.zst"):
        ms = _members(1) + [(name, b"z")]
        man = manifest_for(ms)
        if name == "docs/f0.zst":
            man["members"][2].update(compression="zstd")  # type: ignore[index]
        with pytest.raises(FormatError):
            parse_manifest(canonical_json(man))


def test_threshold_needs_distinct_trusted_signers(tmp_path: Path) -> None:
    a, b, c = (SecretKey.generate() for _ in range(3))
    ms = _members(1)
    policy = TrustPolicy(keys=(a.public_key(), b.public_key(), c.public_key()), threshold=2)
    ok = forge(tmp_path / "ok.abhed", manifest_for(ms), ms, [a, c])
    assert set(verify_bundle(ok, policy).signers) == {a.public_key().id_hex,
                                                       c.public_key().id_hex}
    for signers in ([a], [a, a], [a, SecretKey.generate()]):
        path = forge(tmp_path / "no.abhed", manifest_for(ms), ms, signers)
        with pytest.raises(SignatureError, match="1 valid signature"):
            verify_bundle(path, policy)


def test_staging_must_be_new_and_full_disk_is_reported_cleanly(
        built: Path, trust: TrustPolicy, tmp_path: Path) -> None:
    (tmp_path / "exists").mkdir()
    with pytest.raises(StagingError, match="already exists"):
        verify_bundle(built, trust, stage_to=tmp_path / "exists")
    # A real "disk full": a child process with a file-size limit (RLIMIT_FSIZE) writes
    # staging until the kernel refuses with EFBIG, as a full file system refuses with ENOSPC.
    script = f"""
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))
from bundle import verify_bundle, StagingError, TrustPolicy, PublicKey
trust = TrustPolicy(keys=(PublicKey.from_base64({trust.keys[0].to_base64()!r}),))
try:
    verify_bundle(Path({str(built)!r}), trust, stage_to=Path({str(tmp_path / 'st')!r}))
except StagingError as exc:
    print("STAGING", exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert "STAGING staging ran out of space" in done.stdout, done.stderr
    assert "partial staging was removed" in done.stdout
    assert not (tmp_path / "st").exists()


def test_not_a_file_empty_and_garbage(tmp_path: Path, trust: TrustPolicy) -> None:
    with pytest.raises(Exception, match="no such file"):
        verify_bundle(tmp_path / "missing", trust)
    with pytest.raises(Exception, match="not a regular file|Is a directory"):
        verify_bundle(tmp_path, trust)
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(FormatError):
        verify_bundle(tmp_path / "empty", trust)
    (tmp_path / "zeros").write_bytes(bytes(1024))
    with pytest.raises(FormatError, match="empty archive"):
        verify_bundle(tmp_path / "zeros", trust)
    (tmp_path / "junk").write_bytes(b"PK\x03\x04" + bytes(2000))
    with pytest.raises(FormatError, match="checksum"):
        verify_bundle(tmp_path / "junk", trust)


def test_symlink_member_in_a_signed_bundle_is_refused_before_payload(
        tmp_path: Path, key: SecretKey, trust: TrustPolicy) -> None:
    import io
    import tarfile

    ms = _members(1)
    path = forge(tmp_path / "l.abhed", manifest_for(ms), ms[:1], [key])
    raw = path.read_bytes()[:-1024]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        info = tarfile.TarInfo("docs/f0")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tf.addfile(info)
    path.write_bytes(raw + buf.getvalue())
    with pytest.raises(UnsafeMember, match="symbolic link"):
        verify_bundle(path, trust, stage_to=tmp_path / "st")
    assert not (tmp_path / "st").exists()


def test_manifest_json_is_what_the_sbom_and_inputs_say(built: Path, trust: TrustPolicy,
                                                       tmp_path: Path) -> None:
    m = verify_bundle(built, trust, stage_to=tmp_path / "s").manifest
    assert m.platform.accelerator == "nvidia" and m.platform.cuda == "12.2"
    sbom = json.loads((tmp_path / "s" / "sbom.cdx.json").read_text())
    purls = {c.get("purl") for c in sbom["components"]}
    assert {"pkg:pypi/alpha@1.0", "pkg:pypi/vllm@0.0.1",
            "pkg:deb/debian/bash@5.2.15-2+b2?arch=amd64"} <= purls
    assert {i.path for i in m.provenance.inputs} >= {"wheelhouse/alpha-1.0-py3-none-any.whl",
                                                     "image/vmlinuz", "abhed-installer"}
