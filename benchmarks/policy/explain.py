"""``abhed policy explain``: one process per command, beside one ``--batch`` process for them all.

Usage (from the repository root):

    .venv/bin/python benchmarks/policy/explain.py [--single N] [--batch-lines M] [--repeat R]

Commands come from the policy corpus (tests/appliance/policy/corpus/shell_commands.toml),
repeated to ``--batch-lines``.  Prints, side by side: the median wall time of
``abhed policy explain bash ARGS`` (a fresh process each, ``--single`` of them),
the start-up of ``--batch`` (an empty file), and the time per command in a batch
after start-up (whole batch minus start-up, divided by the lines; and the
gaps between answers as they stream: median, 99th percentile, slowest), with the
ratio.  Issue 22's
goal: well under 10 ms per command after start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "appliance" / "policy" / "corpus" / "shell_commands.toml"
ABHED = [sys.executable, "-m", "cli"]


def corpus_commands() -> list[str]:
    cases = tomllib.loads(CORPUS.read_text(encoding="utf-8"))["case"]
    return [c["command"] if "command" in c else c["prefix"] + c["unit"] * c["times"] + c["suffix"]
            for c in cases]


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "ABHED_HOME": str(home), "PYTHONPATH": str(ROOT)}


def single(commands: list[str], workspace: Path, home: Path) -> list[float]:
    times = []
    for command in commands:
        args = json.dumps({"command": command, "description": "bench"})
        start = time.perf_counter()
        subprocess.run([*ABHED, "policy", "explain", "bash", args, "-w", str(workspace),
                        "--mode", "auto"], env=env(home), capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def batch(lines: list[str], workspace: Path, home: Path) -> tuple[float, list[float], int]:
    """(total seconds, the gaps between answers as they stream, answers) for one --batch run."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for command in lines:
            f.write(json.dumps({"command": command}) + "\n")
        path = f.name
    try:
        start = time.perf_counter()
        proc = subprocess.Popen([*ABHED, "policy", "explain", "--batch", path, "-w", str(workspace),
                                 "--mode", "auto"], env=env(home), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        stamps = [time.perf_counter() for _ in iter(proc.stdout.readline, b"")]
        proc.wait()
        total = time.perf_counter() - start
    finally:
        os.unlink(path)
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return total, gaps, len(stamps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--single", type=int, default=20, help="commands explained one process each")
    ap.add_argument("--batch-lines", type=int, default=2000, help="lines in the batch file")
    ap.add_argument("--repeat", type=int, default=3, help="batch runs (the median is kept)")
    opts = ap.parse_args()
    commands = corpus_commands()
    lines = (commands * (opts.batch_lines // len(commands) + 1))[:opts.batch_lines]
    with tempfile.TemporaryDirectory() as tmp:
        workspace, home = Path(tmp) / "ws", Path(tmp) / "home"
        workspace.mkdir()
        home.mkdir()
        singles = single(commands[:opts.single], workspace, home)
        empties = [batch([], workspace, home)[0] for _ in range(opts.repeat)]
        runs = [batch(lines, workspace, home) for _ in range(opts.repeat)]
    one = statistics.median(singles)
    startup = statistics.median(empties)
    total = statistics.median(r[0] for r in runs)
    per = (total - startup) / max(len(lines), 1)
    gaps = sorted(g for r in runs for g in r[1]) or [0.0]
    median_gap, p99_gap, worst_gap = statistics.median(gaps), gaps[int(len(gaps) * 0.99)], gaps[-1]
    assert all(r[2] == len(lines) for r in runs), "a batch lost lines"
    load = os.getloadavg()[0]
    print(f"load average (1 min): {load:.2f}")
    print(f"{'form':<44}{'seconds':>12}")
    print(f"{'explain, one process per command (median)':<44}{one:>12.3f}")
    print(f"{'--batch start-up (empty file)':<44}{startup:>12.3f}")
    print(f"{f'--batch of {len(lines)} lines, whole run':<44}{total:>12.3f}")
    print(f"{'--batch, per command after start-up':<44}{per:>12.5f}")
    print(f"{'--batch, gap between two answers: median':<44}{median_gap:>12.5f}")
    print(f"{'--batch, gap between two answers: 99th pct':<44}{p99_gap:>12.5f}")
    print(f"{'--batch, gap between two answers: slowest':<44}{worst_gap:>12.5f}")
    print(f"ratio (one process per command / batch per command): {one / per:,.0f}x")
    print(f"\n| form | per command |\n|---|---|\n| `explain` per command | {one * 1000:.0f} ms |\n"
          f"| `--batch` start-up | {startup * 1000:.0f} ms once |\n"
          f"| `--batch` after start-up ({len(lines)} lines), mean | {per * 1000:.2f} ms |\n"
          f"| `--batch`, one answer to the next: median / 99th pct / slowest | "
          f"{median_gap * 1000:.2f} / {p99_gap * 1000:.1f} / {worst_gap * 1000:.0f} ms |\n"
          f"| ratio (per command) | {one / per:,.0f}x |")


if __name__ == "__main__":
    main()
