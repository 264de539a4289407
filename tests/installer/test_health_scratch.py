"""The gate's scratch directory: the same short path on every gate of a release (a small
model at temperature 0 copies some paths right and others wrongly), never one planted."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from installer._health import _scratch


def test_fixed_per_release_then_random_when_taken(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    release = tmp_path / "releases" / "7"
    first = _scratch(release)
    assert first == tmp_path / "abhed-gate-7"
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    second = _scratch(release)  # a concurrent gate on another prefix
    assert second != first and second.name.startswith("abhed-gate-7-")
    assert stat.S_IMODE(second.stat().st_mode) == 0o700


def test_a_planted_link_or_directory_is_never_used(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "abhed-gate-3")
    got = _scratch(tmp_path / "releases" / "3")
    assert got.parent == tmp_path and not got.is_symlink()
    assert got.name.startswith("abhed-gate-3-") and list(elsewhere.iterdir()) == []
