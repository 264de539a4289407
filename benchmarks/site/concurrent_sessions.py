"""N engineers' sessions at once against one model server, beside one session alone.

How an operator sizes a shared host: each "engineer" is a real ``abhed run``
process with its own ABHED_HOME and workspace, as on the host; all of them
talk to one model server (vLLM's CPU build serving the tiny test model, as the
slow tests do, or the scripted server to time Abhed's own share). Each run
reads a file (its first turn forced to ``read``, so the tiny model makes a
real call) and answers, for ``--turns`` model turns at most.

    .venv/bin/python benchmarks/site/concurrent_sessions.py [--sessions 1,2,4] [--turns 2]
                                                           [--server vllm|scripted] [--repeat 1]

For each N it prints the wall time of the whole batch, the mean and slowest
session, and the ratios against one session alone: ``slowdown`` (a session's
time at N over alone: what an engineer feels) and ``throughput`` (sessions per
second at N over alone: what the host gains by batching). vLLM batches the
engineers' requests, so throughput should rise with N until the server's
``--max-num-seqs`` or the CPU is the limit; the 1-minute load average is
printed beside every row, since this machine is shared.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _server(kind: str, turns: int) -> tuple[str, dict[str, Any], Any]:
    """The model server's base URL, the provider entry for it, and what to stop afterwards."""
    if kind == "scripted":
        from models import ScriptedServer

        def reply(body: dict[str, Any]) -> Any:
            from models import ScriptStep

            done = sum(m.get("role") == "tool" for m in body["messages"])
            if done < turns - 1:
                path = body["messages"][-1]["content"].split("`")[1] if done == 0 else "/dev/null"
                return ScriptStep(tool_calls=[{"name": "read", "arguments": {"path": path}}])  # type: ignore[list-item]
            return ScriptStep(text="It says 42.")

        server = ScriptedServer(responder=reply, model="scripted").start()
        return server.base_url, {"model": "scripted"}, server
    from tests.vllm_server import HONOURED, SERVED, shared_vllm

    vllm = shared_vllm()
    catalog = vllm.home / "catalog.json"
    return vllm.base_url, {"model": SERVED, "catalog_entry": "tiny", "sampling": HONOURED,
                           "params": {"temperature": 0, "seed": 7, "max_tokens": 48},
                           "_catalog": str(catalog)}, None


def _engineer(base: Path, n: int, url: str, provider: dict[str, Any]) -> tuple[Path, Path]:
    home, ws = base / f"home-{n}", base / f"ws-{n}"
    home.mkdir()
    ws.mkdir()
    (ws / "notes.txt").write_text("the answer is 42\n")
    entry = {k: v for k, v in provider.items() if not k.startswith("_")}
    config: dict[str, Any] = {"custom_providers": [{"name": "site", "api": "openai", "base_url": url,
                                                    "max_retries": 0, **entry}],
                              "sandbox": {"backend": "bwrap"}}
    if "_catalog" in provider:
        config["catalog"] = provider["_catalog"]
    (home / "config.json").write_text(json.dumps(config))
    return home, ws


def _one(home: Path, ws: Path, turns: int) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cli", "run",
                           f"What does `{ws / 'notes.txt'}` say?", "-w", str(ws), "--mode", "plan",
                           "--force-tool", "read", "--max-turns", str(turns), "--json"],
                          env={**os.environ, "ABHED_HOME": str(home)}, capture_output=True,
                          text=True, timeout=1800, check=False, cwd=ROOT)
    took = time.perf_counter() - started
    if done.returncode not in (0, 3):  # done, or the turn limit: both are whole sessions
        raise RuntimeError(f"abhed run failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return took


def _batch(homes: list[tuple[Path, Path]], turns: int) -> tuple[float, list[float]]:
    started = time.perf_counter()
    with ThreadPoolExecutor(len(homes)) as pool:
        times = list(pool.map(lambda hw: _one(hw[0], hw[1], turns), homes))
    return time.perf_counter() - started, times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1,2,4", help="the N to measure, comma-separated")
    ap.add_argument("--turns", type=int, default=2, help="model turns per session at most")
    ap.add_argument("--server", choices=("vllm", "scripted"), default="vllm")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    counts = sorted({int(n) for n in args.sessions.split(",")} | {1})
    url, provider, stop = _server(args.server, args.turns)
    rows: list[tuple[int, float, float, float, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="abhed-bench-site-") as tmp:
            engineers = [_engineer(Path(tmp), n, url, provider) for n in range(max(counts))]
            _batch(engineers[:1], args.turns)  # warm: the first request compiles and caches
            for n in counts:
                walls, means, worst = [], [], []
                for _ in range(args.repeat):
                    wall, times = _batch(engineers[:n], args.turns)
                    walls.append(wall)
                    means.append(statistics.mean(times))
                    worst.append(max(times))
                rows.append((n, min(walls), min(means), min(worst), os.getloadavg()[0]))
    finally:
        if stop is not None:
            stop.stop()
    alone = rows[0][2]
    print(f"{args.server}, {args.turns} turn(s) per session, best of {args.repeat}")
    print(f"{'N':>3} {'batch s':>8} {'mean s':>8} {'slowest s':>9} {'slowdown':>9} "
          f"{'throughput':>10} {'load':>5}")
    for n, wall, mean, worst, load in rows:
        print(f"{n:>3} {wall:8.2f} {mean:8.2f} {worst:9.2f} {mean / alone:8.2f}x "
              f"{(n / wall) / (1 / alone):9.2f}x {load:5.1f}")


if __name__ == "__main__":
    main()
