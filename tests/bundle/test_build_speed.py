"""Bundle build's single pass (issue 16) keeps bundles byte-identical and honest.

Compressible inputs are read once (hashed and compressed from the same
buffer), compressed members reach the tar by ``copy_file_range``, a wheel is
hashed once while gathering; none of it may change a byte of the bundle or
let a changing input through.
"""

from __future__ import annotations

import builtins
import hashlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bundle import SecretKey, SpecError, _build, build_bundle, verify_bundle
from models.bundle_kit import BUNDLE_KIT

from .conftest import write_inputs


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_bundle_is_the_same_for_any_number_of_zstd_workers(
        tmp_path: Path, key: SecretKey, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_inputs(tmp_path / "in", model_bytes=3_000_000)
    digests = set()
    for workers in (1, 2, 7):
        monkeypatch.setattr(_build, "_zstd_threads", lambda w=workers: w)
        out = tmp_path / f"b{workers}.abhed"
        build_bundle(spec, out, [key], model_kit=BUNDLE_KIT)
        digests.add(_sha(out))
    assert len(digests) == 1


def test_without_copy_file_range_the_bytes_are_the_same(
        tmp_path: Path, key: SecretKey, trust: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_inputs(tmp_path / "in")
    build_bundle(spec, tmp_path / "a.abhed", [key], model_kit=BUNDLE_KIT)

    def refuse(*args: object) -> int:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(_build.os, "copy_file_range", refuse)
    build_bundle(spec, tmp_path / "b.abhed", [key], model_kit=BUNDLE_KIT)
    assert _sha(tmp_path / "a.abhed") == _sha(tmp_path / "b.abhed")
    verify_bundle(tmp_path / "b.abhed", trust)


def test_each_input_is_opened_once_for_compression_and_wheels_once_more_to_copy(
        tmp_path: Path, key: SecretKey, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_inputs(tmp_path / "in")
    opened: Counter[str] = Counter()
    real_open = builtins.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened[os.fspath(file)] += 1
        return real_open(file, *args, **kwargs)

    real_digest = _build.digest_file

    def counting_digest(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened[os.fspath(path)] += 1  # foundation.digest_file opens the file once per call
        return real_digest(path, *args, **kwargs)

    monkeypatch.setattr(_build, "open", counting_open, raising=False)
    monkeypatch.setattr(_build, "digest_file", counting_digest)
    build_bundle(spec, tmp_path / "b.abhed", [key], model_kit=BUNDLE_KIT)
    weights = str(tmp_path / "in" / "models" / "tiny" / "model.safetensors")
    assert opened[weights] == 1  # hashed and compressed in one read; the tar gets the work file
    wheels = [p for p in opened if p.endswith(".whl") and "/wheelhouse/" in p]
    assert wheels and all(opened[p] == 2 for p in wheels)  # lock check, then the hashed copy


def test_an_input_that_changes_size_while_compressing_is_refused(
        tmp_path: Path, key: SecretKey, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_inputs(tmp_path / "in", model_bytes=400_000)
    real_fstat = os.fstat

    def lying_fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        if st.st_size >= 400_000 - 388 and st.st_size < 400_000:  # the weights, as opened
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid,
                                   st.st_gid, st.st_size - 1000, 0, 0, 0))
        return st

    monkeypatch.setattr(_build.os, "fstat", lying_fstat)
    out = tmp_path / "b.abhed"
    with pytest.raises(SpecError, match="changed size"):
        build_bundle(spec, out, [key], model_kit=BUNDLE_KIT)
    assert not out.exists()


def test_a_wheel_that_changes_after_its_lock_check_is_refused(
        tmp_path: Path, key: SecretKey, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_inputs(tmp_path / "in")
    real_prepare = _build._prepare

    def prepare_then_tamper(spec_: Any, source: Any, *args: Any) -> Any:
        done = real_prepare(spec_, source, *args)
        if source.path.name.startswith("beta-"):
            with open(source.path, "ab") as fh:
                fh.write(b"tampered")
        return done

    monkeypatch.setattr(_build, "_prepare", prepare_then_tamper)
    out = tmp_path / "b.abhed"
    with pytest.raises(SpecError, match="changed while the bundle was being built"):
        build_bundle(spec, out, [key], model_kit=BUNDLE_KIT)
    assert not out.exists()
