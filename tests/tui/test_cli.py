"""`abhed tui` and bare `abhed` as commands."""

from __future__ import annotations

import subprocess
import sys


def test_bare_abhed_without_a_terminal_prints_help_not_a_crash() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli"], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "tui" in proc.stdout and "Traceback" not in proc.stderr


def test_tui_help_and_bad_options() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli", "tui", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "--workspace" in proc.stdout and "--mode" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "cli", "tui", "--mode", "yolo"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "yolo" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "cli", "tui", "-w", "/nonexistent/x"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
