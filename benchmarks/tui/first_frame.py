"""Time from `abhed tui` to its first frame on a real pseudo-terminal.

Starts `python -m cli tui` on a pty (with a config pointing at the
scripted server, so start-up is the TUI's, not a model server's) and times
until the status line's first state ("starting" or "idle") has been written.
Issue 13's target: under 500 ms on this machine.

    .venv/bin/python benchmarks/tui/first_frame.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from models.scripted import ScriptedServer  # noqa: E402


def once(home: Path, workspace: Path) -> float:
    master, slave = pty.openpty()
    env = {**os.environ, "ABHED_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "100",
           "LINES": "30"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "tui", "-w", str(workspace)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                            start_new_session=True)
    os.close(slave)
    seen = b""
    took = float("nan")
    deadline = t0 + 30
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
            if b"starting" in seen or b"idle" in seen:
                took = time.perf_counter() - t0
                break
    os.write(master, b"\x04")  # Ctrl+D quits
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    os.close(master)
    return took


def main(runs: int) -> None:
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        ws.mkdir()
        (home / "config.json").write_text(json.dumps({"custom_providers": [{
            "name": "local", "api": "openai", "base_url": server.base_url, "sampling": [],
            "model": "scripted"}], "sandbox": {"backend": "host"}}))
        times = [once(home, ws) for _ in range(runs)]
    ms = sorted(t * 1000 for t in times)
    cpu = []
    for _ in range(3):  # the imports before the first frame, as CPU time (load-independent)
        proc = subprocess.run([sys.executable, "-c", "import resource, cli.tui, tui; "
                               "r = resource.getrusage(resource.RUSAGE_SELF); "
                               "print(r.ru_utime + r.ru_stime)"], capture_output=True, text=True,
                              cwd=ROOT, check=True)
        cpu.append(float(proc.stdout) * 1000)
    print(f"first frame of `abhed tui` on a pty, {runs} runs: median {statistics.median(ms):.0f} ms, "
          f"min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms")
    print(f"CPU time of the process start and imports before it (python, click, textual): "
          f"median {statistics.median(cpu):.0f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    main(ap.parse_args().runs)
