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

``--hosts 1,2`` measures the model side instead, with real vLLM (the CPU build and the
suite's test model): N concurrent sessions' requests (a 1-token reply for the time to
the first token, then a 64-token one for the rate, ``ignore_eos``) against one model host, and against two behind the vLLM project's
router (``vllm-router``, round robin), each host its own ``abhed serve`` pinned to its
own core (``taskset``), so the ratio means something on a 2-core machine.  Per N it
prints each session's mean time to first token and tokens per second on one host and
on two, side by side, and two over one as ratios.

    .venv/bin/python benchmarks/site/concurrent_sessions.py --hosts 1,2 --sessions 1,2,4,8
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
        from models.scripted import ScriptedServer

        def reply(body: dict[str, Any]) -> Any:
            from models.scripted import ScriptStep

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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _vllm_host(core: int, base: Path) -> tuple[str, subprocess.Popen[str]]:
    """``abhed serve`` of the test model, pinned to ``core``: its root URL and process."""
    from tests.vllm_server import entry_for, tiny_model, vllm_python, write_home

    python = vllm_python()
    home = base / f"host-{core}"
    write_home(home, python, entry_for(tiny_model(python)), _free_port())
    proc = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-m", "cli", "serve",
                             "--model", "tiny"], env={**os.environ, "ABHED_HOME": str(home)},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.wait(60)
        raise RuntimeError(f"abhed serve did not start on core {core}; log in {home}/logs")
    return url.removesuffix("/v1"), proc


def _router(replicas: tuple[str, ...], base: Path) -> tuple[str, subprocess.Popen[bytes]]:
    from models import RouterSettings, router_command

    python = subprocess.run([str(ROOT / "scripts/router-env")], capture_output=True, text=True,
                            check=True, timeout=900).stdout.strip().splitlines()[-1]
    settings = RouterSettings(replicas=replicas, policy="round_robin", port=_free_port(),
                              health_check_interval_s=1)
    log = (base / "router.log").open("wb")
    proc = subprocess.Popen(router_command(settings, python), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    return settings.base_url, proc


def _ask(client: Any, url: str, n: int, max_tokens: int) -> tuple[float, int]:
    body = {"model": "tiny", "temperature": 0, "max_tokens": max_tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Session {n}: list the files, then say "
                          "what the notes file holds."}]}
    started = time.perf_counter()
    resp = client.post(url + "/chat/completions", json=body)
    resp.raise_for_status()
    return time.perf_counter() - started, int(resp.json()["usage"]["completion_tokens"])


def _stream(url: str, n: int) -> tuple[float, float]:
    """One session: (seconds to the first token, tokens per second after it).

    Measured as two requests in a row rather than read off one stream: vLLM sends no
    chunk for a token whose text is empty, and the test model's random tokens often
    decode to nothing, so a stream's first chunk can come only at its end.  The first
    token's time is a 1-token reply's (prefill and one step, queueing included); the rate
    is the other 63 tokens of a 64-token reply over the time it took beyond that."""
    import httpx

    with httpx.Client(timeout=600, trust_env=False) as client:
        first, _ = _ask(client, url, n, 1)
        whole, tokens = _ask(client, url, n, 64)
    if tokens < 2:
        raise RuntimeError(f"{url} answered {tokens} token(s), not 64: ignore_eos not honoured?")
    return first, (tokens - 1) / max(whole - first, 1e-3)


def _sessions_at(url: str, n: int, repeat: int) -> tuple[float, float]:
    """Mean time to first token and mean tokens/s per session, N at once, best of repeat."""
    best: tuple[float, float] | None = None
    for _ in range(repeat):
        with ThreadPoolExecutor(n) as pool:
            got = list(pool.map(lambda i: _stream(url, i), range(n)))
        row = (statistics.mean(t for t, _ in got), statistics.mean(r for _, r in got))
        best = row if best is None or row[0] < best[0] else best
    assert best is not None
    return best


def _hosts(counts: list[int], repeat: int) -> None:
    procs: list[subprocess.Popen[Any]] = []
    with tempfile.TemporaryDirectory(prefix="abhed-bench-hosts-") as tmp:
        try:
            with ThreadPoolExecutor(2) as pool:  # both start at once, each on its core
                started = [pool.submit(_vllm_host, core, Path(tmp)) for core in (0, 1)]
            roots = []
            for fut in started:
                if fut.exception() is None:
                    root, proc = fut.result()
                    procs.append(proc)
                    roots.append(root)
            for fut in started:
                fut.result()  # the first start that failed, raised
            one, two = roots
            routed, router = _router((one, two), Path(tmp))
            procs.append(router)
            _wait_router(routed)
            urls = {1: one + "/v1", 2: routed}
            for url in urls.values():
                _sessions_at(url, 2, 1)  # warm: the first requests compile and cache
            rows = []
            for n in counts:
                a = _sessions_at(urls[1], n, repeat)
                b = _sessions_at(urls[2], n, repeat)
                rows.append((n, a, b, os.getloadavg()[0]))
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(60)
    print(f"real vLLM (CPU build, test model), 1 then 64 tokens per session, best of {repeat}; "
          "one host on core 0, two hosts on cores 0 and 1 behind vllm-router")
    print(f"{'N':>3} {'TTFT 1h s':>10} {'TTFT 2h s':>10} {'2h/1h':>6} {'tok/s 1h':>9} "
          f"{'tok/s 2h':>9} {'2h/1h':>6} {'load':>5}")
    for n, (t1, r1), (t2, r2), load in rows:
        print(f"{n:>3} {t1:10.2f} {t2:10.2f} {t2 / t1:5.2f}x {r1:9.1f} {r2:9.1f} "
              f"{r2 / r1:5.2f}x {load:5.1f}")


def _wait_router(url: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            _stream(url, 0)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1,2,4", help="the N to measure, comma-separated")
    ap.add_argument("--turns", type=int, default=2, help="model turns per session at most")
    ap.add_argument("--server", choices=("vllm", "scripted"), default="vllm")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--hosts", default=None, help="1,2: real vLLM on one model host against "
                    "two behind the router (time to first token, tokens/s per session)")
    args = ap.parse_args(argv)
    counts = sorted({int(n) for n in args.sessions.split(",")} | {1})
    if args.hosts is not None:
        if args.hosts != "1,2":
            ap.error("--hosts takes 1,2 (one model host against two)")
        _hosts(counts, args.repeat)
        return
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
