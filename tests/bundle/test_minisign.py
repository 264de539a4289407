"""Our minisign formats against the real ``minisign`` binary, both ways."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bundle import FormatError, PublicKey, SecretKey, SignatureError
from bundle._minisign import parse_signatures, sign, verify

MINISIGN = shutil.which("minisign")


def _minisign(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert MINISIGN is not None, "minisign must be installed (scripts/apt-packages.txt)"
    return subprocess.run([MINISIGN, *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30, check=False)


@pytest.mark.parametrize("prehash", [True, False], ids=["ED-prehashed", "Ed-legacy"])
def test_stock_minisign_verifies_our_signature(tmp_path: Path, prehash: bool) -> None:
    key = SecretKey.generate()
    (tmp_path / "k.pub").write_text(key.public_key().to_text())
    (tmp_path / "m").write_bytes(b"manifest bytes\n")
    sig = sign(b"manifest bytes\n", key, "abhed trusted comment", prehash=prehash)
    (tmp_path / "m.minisig").write_text(sig.to_text())
    done = _minisign("-V", "-p", "k.pub", "-m", "m", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Trusted comment: abhed trusted comment" in done.stdout
    # ...and minisign refuses it when the file or the trusted comment changes.
    (tmp_path / "m").write_bytes(b"manifest bytes!\n")
    assert _minisign("-V", "-p", "k.pub", "-m", "m", cwd=tmp_path).returncode != 0
    (tmp_path / "m").write_bytes(b"manifest bytes\n")
    text = sig.to_text().replace("abhed trusted comment", "abhed trusted c0mment")
    (tmp_path / "m.minisig").write_text(text)
    assert _minisign("-V", "-p", "k.pub", "-m", "m", cwd=tmp_path).returncode != 0


def test_we_verify_minisigns_default_prehashed_signature_and_legacy(tmp_path: Path) -> None:
    assert _minisign("-G", "-W", "-p", "k.pub", "-s", "k.key", cwd=tmp_path).returncode == 0
    (tmp_path / "m").write_bytes(b"hello\n")
    pub = PublicKey.from_text((tmp_path / "k.pub").read_text())
    for flags, alg in ((["-t", "tc one"], b"ED"), (["-l", "-t", "tc two"], b"Ed")):
        done = _minisign("-S", "-s", "k.key", "-m", "m", *flags, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        [sig] = parse_signatures((tmp_path / "m.minisig").read_bytes())
        assert sig.algorithm == alg
        verify(sig, b"hello\n", pub)
        with pytest.raises(SignatureError, match="altered after signing"):
            verify(sig, b"hello!\n", pub)
        forged = parse_signatures((tmp_path / "m.minisig").read_bytes().replace(
            flags[-1].encode(), b"tc evil"))[0]
        with pytest.raises(SignatureError, match="trusted comment"):
            verify(forged, b"hello\n", pub)


def test_minisign_signs_with_our_secret_key_and_we_sign_with_its(tmp_path: Path) -> None:
    ours = SecretKey.generate()
    (tmp_path / "ours.key").write_text(ours.to_text())
    (tmp_path / "m").write_bytes(b"x" * 1000)
    done = _minisign("-S", "-s", "ours.key", "-m", "m", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [sig] = parse_signatures((tmp_path / "m.minisig").read_bytes())
    verify(sig, b"x" * 1000, ours.public_key())
    # theirs: an unencrypted minisign key signs through our code, minisign verifies
    assert _minisign("-G", "-W", "-p", "t.pub", "-s", "t.key", cwd=tmp_path).returncode == 0
    theirs = SecretKey.from_text((tmp_path / "t.key").read_text())
    assert theirs.public_key() == PublicKey.from_text((tmp_path / "t.pub").read_text())
    (tmp_path / "m.minisig").write_text(sign(b"x" * 1000, theirs, "ok").to_text())
    assert _minisign("-V", "-p", "t.pub", "-m", "m", cwd=tmp_path).returncode == 0


def test_signature_by_another_key_is_named(tmp_path: Path) -> None:
    a, b = SecretKey.generate(), SecretKey.generate()
    sig = sign(b"m", a, "c")
    with pytest.raises(SignatureError, match=a.public_key().id_hex):
        verify(sig, b"m", b.public_key())


def test_encrypted_minisign_key_is_refused_with_next_step() -> None:
    # A password-encrypted key differs in its kdf field ("Sc", scrypt); making a real one
    # costs minisign 1 GiB and ~10 s of scrypt, so the field is set on a real key's bytes.
    import base64

    comment, line = SecretKey.generate().to_text().splitlines()
    raw = bytearray(base64.b64decode(line))
    raw[2:4] = b"Sc"
    with pytest.raises(FormatError, match="password-encrypted.*minisign -C"):
        SecretKey.from_text(comment + "\n" + base64.b64encode(bytes(raw)).decode())


@pytest.mark.parametrize("text", [
    "", "untrusted comment: x\n", "untrusted comment: x\nnot base64!!\n",
    "untrusted comment: x\nRWQAAAA=\n", "nope\nRWTc+AUWk/wCCzwfkoEicLBRtltikCL0L6t3hcWjwJiAcEgPg/0qoD6p\n",
    "untrusted comment: x\n" + "A" * 56 + "\n",
])
def test_malformed_public_keys_are_refused(text: str) -> None:
    with pytest.raises(FormatError):
        PublicKey.from_text(text)


@pytest.mark.parametrize("data", [
    b"", b"\xff\xfe", b"untrusted comment: a\nb\ntrusted comment: c\n",
    b"untrusted comment: a\n" + b"A" * 100 + b"\ntrusted comment: c\n" + b"A" * 88 + b"\n",
    b"x" * 70_000,
    b"untrusted comment: " + b"a" * 2000 + b"\nb\ntrusted comment: c\nd\n",
])
def test_malformed_signature_files_are_refused(data: bytes) -> None:
    with pytest.raises(FormatError):
        parse_signatures(data)


def test_signature_set_holds_several_blocks_and_minisign_reads_the_first(tmp_path: Path) -> None:
    from bundle._trust import sign_set

    a, b = SecretKey.generate(), SecretKey.generate()
    data = sign_set(b"doc", [a, b], "set")
    assert [s.key_id for s in parse_signatures(data)] == [a.key_id, b.key_id]
    (tmp_path / "doc").write_bytes(b"doc")
    (tmp_path / "doc.minisig").write_bytes(data)
    (tmp_path / "a.pub").write_text(a.public_key().to_text())
    assert _minisign("-V", "-p", "a.pub", "-m", "doc", cwd=tmp_path).returncode == 0
