"""The loop's own overhead per tool round trip, excluding model time.

Runs the agent against the scripted server (a real socket) for N turns, each
calling `read` on a small file, and subtracts the time spent waiting on the
model (``model_turn.duration_ms``) and inside the tool
(``observation.duration_ms``).  What is left is what the loop itself costs:
message assembly, three events recorded per turn (SQLite, hash chain),
dispatch, argument validation, untrusted wrapping.  Target: under 5 ms per
round trip.  On a loaded machine wall-clock numbers inflate; the load average
is printed beside them.

    .venv/bin/python benchmarks/loop/bench_loop.py [TURNS]

Prints per-turn numbers and the ratio to the 5 ms target.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from appliance import Dispatcher, Session
from appliance.events import EventStore, ModelTurn, ObservationEvent
from appliance.loop import Agent, Limits, build_system_prompt
from appliance.policy import Gate
from models import ProviderConfig, open_provider
from models.scripted import ScriptedServer
from tools import ToolContext, Workspace, native_tools

TARGET_MS = 5.0


def main(turns: int = 200) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp, "ws")
        ws.mkdir()
        for i in range(20):
            (ws / f"f{i}.py").write_text("x = 1\n")
        step = {"tool_calls": [{"name": "read", "arguments": {"path": str(ws.resolve() / "f0.py")}}],
                "chunk_chars": 64}
        with ScriptedServer([step] * turns + [{"text": "done"}]) as server:
            store = EventStore(Path(tmp, "events.db"))
            provider = open_provider(ProviderConfig(name="b", api="openai", base_url=server.base_url,
                                                    model="scripted", max_retries=0))
            tools = native_tools()
            w = Workspace(str(ws))
            session = Session.create(store, w.root, version="bench")
            model_ms: list[float] = []
            tool_ms: list[float] = []
            session.listen(lambda e: model_ms.append(e.event.duration_ms)
                           if isinstance(e.event, ModelTurn) else None)
            session.listen(lambda e: tool_ms.append(e.event.duration_ms)
                           if isinstance(e.event, ObservationEvent) else None)
            dispatcher = Dispatcher(session, tools, ToolContext(w, ledger=session), Gate.permissive())
            agent = Agent(session=session, dispatcher=dispatcher,
                          provider=provider, system_prompt=build_system_prompt(w.root, tools), tools=tools,
                          limits=Limits(max_turns=turns + 1, max_tokens=10**12))
            t0 = time.perf_counter()
            out = agent.run("benchmark")
            total_ms = (time.perf_counter() - t0) * 1000
            provider.close()
            store.close()
    assert out.ok, out
    overhead = (total_ms - sum(model_ms) - sum(tool_ms)) / turns
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"turns: {turns}  total: {total_ms:.1f} ms  model (scripted server) time: {sum(model_ms):.1f} ms"
          f"  tool time: {sum(tool_ms):.1f} ms")
    print(f"median model wait per turn: {statistics.median(model_ms):.2f} ms")
    print(f"loop overhead per tool round trip: {overhead:.2f} ms "
          f"(target {TARGET_MS} ms; ratio {overhead / TARGET_MS:.2f}x of target)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
