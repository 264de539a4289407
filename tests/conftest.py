"""Keep the developer's machine out of every test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def abhed_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point ABHED_HOME at a fresh temp dir for every test."""
    home = tmp_path_factory.mktemp("abhed-home")
    monkeypatch.setenv("ABHED_HOME", str(home))
    yield home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory (its real path, symlinks resolved)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()
