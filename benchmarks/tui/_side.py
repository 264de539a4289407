"""Run a TUI benchmark on an older commit beside this tree (``--against REV``).

Checks REV out in a temporary git worktree, runs the same benchmark script
there in a child process with ``--root TREE --json``, and returns the JSON
the child printed last.  The child imports the app from TREE, so both sides
are measured by the same code with only the app differing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_child(script: Path, argv: list[str], root: Path = ROOT) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(script), "--root", str(root), "--json", *argv],
                          capture_output=True, text=True, check=False, cwd=root)
    if proc.returncode != 0:
        raise SystemExit(f"the run at {root} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_against(rev: str, script: Path, argv: list[str]) -> dict[str, Any]:
    tree = Path(tempfile.mkdtemp(prefix="abhed-bench-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                   check=True, capture_output=True)
    try:
        return run_child(script, argv, tree)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True)


def run_together(rev: str, script: Path, argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(now, before): both trees measured at the same time, so a shared, noisy machine
    loads both alike (each also slows the other: compare the two columns, not with
    figures taken alone)."""
    with ThreadPoolExecutor(2) as pool:
        before = pool.submit(run_against, rev, script, argv)
        now = pool.submit(run_child, script, argv)
        return now.result(), before.result()


def tune_gc_of(tui: Any) -> Any:
    """The app's collector tuning, public now; an older tree kept it in its test harness or
    only inside the app's module."""
    helpers = sys.modules.get("tests.tui.helpers")
    return getattr(tui, "tune_gc", None) or getattr(helpers, "tune_gc", None) \
        or sys.modules.get("tui._app").tune_gc


def table(rows: list[tuple[str, str]], now: dict[str, Any], before: dict[str, Any] | None,
          rev: str) -> None:
    head = f"{'':30}{'now':>12}"
    if before is not None:
        head += f"{rev[:12]:>14}{'before/now':>12}"
    print(head)
    for label, key in rows:
        row = f"{label:30}{now[key]:>12.1f}"
        if before is not None:
            ratio = f"{before[key] / now[key]:>11.2f}x" if now[key] else f"{'-':>12}"
            row += f"{before[key]:>14.1f}{ratio}"
        print(row)
