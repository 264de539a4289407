"""The whole repository stays `ruff check` clean (the rule set lives in pyproject.toml).

The rules are named there explicitly and ruff is pinned, so this test fails
only when our code changes, not when a newer ruff widens its defaults.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_repository_is_ruff_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                           "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rule_set_catches_a_late_bound_loop_variable(tmp_path: Path) -> None:
    # The check must be able to fail: a lambda that reads a loop variable late
    # (bugbear B023) is the bug class we turned the rules on for.
    bad = tmp_path / "bad.py"
    bad.write_text("fns = []\nfor i in range(3):\n    fns.append(lambda: i)\n")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                           "--config", str(ROOT / "pyproject.toml"), str(bad)],
                          cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 1 and "B023" in proc.stdout, proc.stdout + proc.stderr
