"""What compaction costs, and how much of each prompt vLLM serves from its prefix cache.

Drives one session against the real vLLM CPU server (the tiny test model, as
the slow tests use it).  The tiny model's tool arguments are random, so the
reads are recorded as the loop records them (a model turn calling ``read`` on
a 0.6 KB file, run through the dispatcher) and each is followed by a real run
(one request): the conversation grows by a tool result per run.
After every request it reads vLLM's ``/metrics`` (prefix-cache queries and
hits, in tokens) and prints the share of that request's prompt served from the
cache.  Then it compacts by hand (masking old outputs) and runs TURNS more,
printing what the compaction took (wall time, tokens before and after) and
what it cost in cache hits: the first request after it re-reads the changed
middle of the prompt.

    .venv/bin/python benchmarks/sessions/bench_compaction.py [TURNS]

The stable prefix (system prompt, tool list) should be served from the cache
from the second request on (target: at least 90% of prompt tokens).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from appliance.compose import load_config, start_agent
from appliance.events import (
    EventStore,
    ModelTurn,
    RunEnded,
    RunStarted,
    TurnToolCall,
    UserMessage,
)
from tests.vllm_server import SERVED, vllm_base_url


def _metrics(base_url: str) -> dict[str, float]:
    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(root + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        key = name.split("{", 1)[0]
        if "prefix_cache" in key or key.startswith("vllm:prompt_tokens"):
            try:
                out[key] = out.get(key, 0.0) + float(value)
            except ValueError:
                pass
    return out


def _hit(before: dict[str, float], after: dict[str, float]) -> str:
    q = [k for k in after if k.endswith("prefix_cache_queries_total") or k.endswith("prefix_cache_queries")]
    h = [k for k in after if k.endswith("prefix_cache_hits_total") or k.endswith("prefix_cache_hits")]
    if not q or not h:
        return "n/a (this vLLM exposes no prefix-cache counters)"
    dq = after[q[0]] - before.get(q[0], 0.0)
    dh = after[h[0]] - before.get(h[0], 0.0)
    return f"{dh / dq:6.1%} of {int(dq)} prompt tokens" if dq else "no prompt tokens counted"


def main(turns: int = 4) -> None:
    base_url = vllm_base_url()
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp, "home"), Path(tmp, "ws")
        home.mkdir()
        ws.mkdir()
        os.environ["ABHED_HOME"] = str(home)
        for i in range(turns):
            (ws / f"f{i}.txt").write_text("".join(f"line {n} of file {i}\n" for n in range(30)))
        provider = {"name": "local", "api": "openai", "base_url": base_url, "model": SERVED,
                    "sampling": ["temperature", "max_tokens"],
                    "params": {"temperature": 0, "max_tokens": 48}}
        cfg = home / "config.json"
        cfg.write_text(json.dumps({"custom_providers": [provider],
                                   "loop": {"max_turns": 1, "max_repeated_failures": 0,
                                            "context_tokens": 8192, "compact_at": 0.95},
                                   "sandbox": {"backend": "host"}}))
        config = load_config(cfg)
        store = EventStore(home / "state" / "events.db")
        agent = start_agent(config, store, ws, door="benchmark", mode="auto").agent
        # The tiny model's context is 8192 tokens and its tokenizer is verbose: offer only
        # read, so the tool list leaves room for a conversation.
        agent.specs = [t for t in agent.specs if t["function"]["name"] == "read"]
        print(f"load average {os.getloadavg()[0]:.2f}; model {SERVED}; {turns} runs, then compact, "
              "then 3 more")
        try:
            def read(n: int) -> None:
                """A recorded model turn that reads f{n}, run through the dispatcher."""
                sid, rid, cid = agent.session.id, f"r-bench{n:03d}", f"r-bench{n:03d}.1.0"
                args = {"path": str(ws / f"f{n}.txt")}
                agent.session.append(RunStarted(session_id=sid, run_id=rid, provider="bench",
                                                model=SERVED, mode="auto", system_prompt_sha256="-"))
                agent.session.append(UserMessage(session_id=sid, run_id=rid, text=f"read f{n}"))
                agent.session.append(ModelTurn(session_id=sid, run_id=rid, turn=1, text="",
                                               tool_calls=[TurnToolCall(id=cid, name="read",
                                                                        arguments=json.dumps(args))],
                                               duration_ms=0.0))
                agent.dispatcher.call("read", args, call_id=cid)
                agent.session.append(RunEnded(session_id=sid, run_id=rid, reason="max_turns",
                                              message="bench", turns=1))

            def one(label: str) -> None:
                before = _metrics(base_url)
                t0 = time.perf_counter()
                agent.run("read a file")
                took = time.perf_counter() - t0
                print(f"{label:<14} {took * 1000:8.0f} ms  cache: {_hit(before, _metrics(base_url))}")

            for n in range(turns):
                read(n)
                one(f"read {n + 1}")
            t0 = time.perf_counter()
            event = agent.compact("manual")
            took = (time.perf_counter() - t0) * 1000
            if event is None:
                print("compaction: nothing to compact")
            else:
                print(f"compaction     {took:8.1f} ms  {event.strategy}: {len(event.masked_call_ids)} outputs "
                      f"masked, {event.tokens_before} -> {event.tokens_after} estimated tokens "
                      f"({1 - event.tokens_after / max(1, event.tokens_before):.0%} saved)")
            for n in range(3):
                one(f"after {n + 1}")
        finally:
            agent.close()
            store.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
