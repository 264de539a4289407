"""Wall time of `abhed probe` against the tiny real model (vLLM CPU) and the scripted model.

    .venv/bin/python benchmarks/probe/wall.py [--concurrency 1,4,16] [--scripted-only]
                                              [--families wire,decide,...]

For each concurrency: the wire family (quick, named tool choice: the tiny model's
bar) against real vLLM's CPU build serving the tests' tiny model, and the whole
probe (all five families) against the scripted reference model, which has no
model time at all, so it shows the probe's own overhead (fixture copies,
dispatch, sandbox commands, event log).  Prints runs, wall seconds, and tokens.
On a GPU host, run `abhed probe` itself: its report carries `wall_s`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _run(base_url: str, home: Path, entry: dict[str, object], families: tuple[str, ...],
         concurrency: int, sampling: list[str]) -> tuple[int, float, int]:
    from appliance.compose import Config
    from appliance.events import EventStore
    from appliance.probe import ProbeOptions, run_probe

    (home / "catalog.json").write_text(json.dumps({"models": [entry]}))
    config = Config.model_validate({
        "custom_providers": [{"name": "p", "api": "openai", "base_url": base_url, "model": entry["served_name"],
                              "sampling": sampling, "params": {"temperature": 0},
                              "catalog_entry": entry["name"], "read_timeout_s": 900}],
        "sandbox": {"backend": "bwrap"}})
    store = EventStore(home / f"events-{time.monotonic_ns()}.db")
    t0 = time.perf_counter()
    try:
        report = run_probe(config, store, options=ProbeOptions(families=families, concurrency=concurrency))
    finally:
        store.close()
    return len(report.runs), time.perf_counter() - t0, report.prompt_tokens + report.completion_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--scripted-only", action="store_true")
    ap.add_argument("--families", default="",
                    help="the scripted model's families, comma-separated (default: all five)")
    ns = ap.parse_args()
    families = tuple(f for f in ns.families.split(",") if f)
    home = Path(tempfile.mkdtemp(prefix="abhed-bench-probe-"))
    os.environ["ABHED_HOME"] = str(home)
    from appliance.probe.scripted import ReferenceModel
    from models.scripted import ScriptedServer

    levels = [int(c) for c in ns.concurrency.split(",")]
    rows: list[tuple[str, int, int, float, int]] = []
    with ScriptedServer(responder=ReferenceModel("good"), model="m") as srv:
        entry = {"name": "m", "served_name": "m", "weights_dir": str(home), "max_model_len": 16384}
        for c in levels:
            n, wall, tokens = _run(srv.base_url, home, entry, families, c, ["temperature", "seed"])
            rows.append((f"scripted, {'+'.join(families) or 'all families'}", c, n, wall, tokens))
    if not ns.scripted_only:
        from tests.vllm_server import HONOURED, shared_vllm

        vllm = shared_vllm()
        entry = vllm.entry.model_dump(mode="json")
        entry["probe"] = {"families": ["wire"], "quick_families": ["wire"], "min_rate": {},
                          "tool_choice": "named"}
        for c in levels:
            n, wall, tokens = _run(vllm.base_url, home, entry, ("wire",), c, HONOURED)
            rows.append(("vLLM CPU tiny, wire", c, n, wall, tokens))
    print(f"{'target':<24} {'concurrency':>11} {'runs':>5} {'wall s':>8} {'tokens':>8}")
    for name, c, n, wall, tokens in rows:
        print(f"{name:<24} {c:>11} {n:>5} {wall:>8.1f} {tokens:>8}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
