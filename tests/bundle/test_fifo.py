"""Operator-named paths that are FIFOs, devices or directories are refused at once, never
waited on: ``open()`` on a FIFO blocks until a writer appears, so every command that reads
a path it was given must check the type on the descriptor it opened without blocking.

Each command runs in a subprocess with a deadline, so a regression fails instead of hanging.
``bundle.open_regular`` and ``read_regular`` themselves are tested beside foundation's, whose
rule they keep (tests/foundation/test_mechanisms.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundle import SecretKey

ABHED = [sys.executable, "-m", "cli"]


def _abhed(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ABHED, *map(str, args)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe.abhed"
    os.mkfifo(p)
    return p


@pytest.fixture
def pub(tmp_path: Path) -> Path:
    key = SecretKey.generate()
    (tmp_path / "k.key").write_text(key.to_text())
    p = tmp_path / "k.pub"
    p.write_text(key.public_key().to_text())
    return p


@pytest.mark.parametrize("verb", ["verify", "inspect"])
def test_verify_and_inspect_refuse_a_fifo(verb: str, fifo: Path, pub: Path) -> None:
    r = _abhed("bundle", verb, fifo, "--trust", pub)
    assert r.returncode == 1, r.stderr
    assert "named pipe" in r.stderr and "Traceback" not in r.stderr


def test_diff_refuses_a_fifo_on_either_side(fifo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.abhed"
    other.write_bytes(bytes(1024))
    for a, b in ((fifo, other), (other, fifo)):
        r = _abhed("bundle", "diff", a, b)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr


def test_a_fifo_as_the_trusted_key_or_rotation_statement_is_a_usage_error(
        fifo: Path, pub: Path, tmp_path: Path) -> None:
    target = tmp_path / "b.abhed"
    target.write_bytes(bytes(1024))
    r = _abhed("bundle", "verify", target, "--trust", fifo)
    assert r.returncode == 2 and "named pipe" in r.stderr, r.stderr
    r = _abhed("bundle", "verify", target, "--trust", pub, "--rotation", fifo)
    assert r.returncode == 2 and "named pipe" in r.stderr, r.stderr


def test_join_refuses_a_fifo_index_signature_or_part(tmp_path: Path, pub: Path) -> None:
    key = tmp_path / "k.key"
    b = tmp_path / "b.abhed"
    b.write_bytes(os.urandom(3000))
    vols = tmp_path / "vols"
    r = _abhed("bundle", "split", b, "--size", "1024", "--out", vols, "--key", key)
    assert r.returncode == 0, r.stderr
    index = vols / "b.abhed.volumes.json"
    # A FIFO in place of part 2: named, and part 1 kept for the next run.
    (vols / "b.abhed.002").unlink()
    os.mkfifo(vols / "b.abhed.002")
    r = _abhed("bundle", "join", index, "--out", tmp_path / "j.abhed", "--trust", pub)
    assert r.returncode == 1 and "named pipe" in r.stderr, r.stderr
    # A FIFO in place of the index's signature, and of the index itself.
    sig = Path(f"{index}.minisig")
    sig.unlink()
    os.mkfifo(sig)
    r = _abhed("bundle", "join", index, "--out", tmp_path / "j2.abhed", "--trust", pub)
    assert r.returncode == 1 and "named pipe" in r.stderr, r.stderr
    index.unlink()
    os.mkfifo(index)
    r = _abhed("bundle", "join", index, "--out", tmp_path / "j3.abhed", "--trust", pub)
    assert r.returncode == 1 and "named pipe" in r.stderr, r.stderr


def test_split_refuses_a_fifo(fifo: Path, tmp_path: Path, pub: Path) -> None:
    r = _abhed("bundle", "split", fifo, "--size", "1M", "--out", tmp_path / "v",
               "--key", tmp_path / "k.key")
    assert r.returncode == 1 and "named pipe" in r.stderr, r.stderr
