"""Every package stays `mypy --strict` clean (the settings live in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_packages_are_mypy_strict_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
