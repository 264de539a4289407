"""Context budget and compaction: mask old outputs first (stubs naming their artifact), then
summarise; todo and plan re-rendered after; circuit breaker; resume sends the same bytes."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from appliance.events import ActionEvent, Compacted, EventStore, RunEnded
from appliance.loop import Limits
from models.scripted import ScriptStep
from tests.appliance.sessions.helpers import agent_on, call


def _summarising(steps: list[Any], summary: ScriptStep,
                 bodies: list[dict[str, Any]] | None = None) -> Any:
    """A responder: the summary request (no tools) gets ``summary``, the rest ``steps`` in order."""
    def responder(body: dict[str, Any]) -> ScriptStep:
        if not body.get("tools"):
            if bodies is not None:
                bodies.append(body)
            return summary
        return ScriptStep.model_validate(steps.pop(0)) if steps else ScriptStep(text="finished")
    return responder


def _big(workspace: Path, n: int) -> Path:
    f = workspace / f"big{n}.txt"
    f.write_text("".join(f"line {i} of file {n} with some padding text\n" for i in range(150)))
    return f


def _todo() -> dict[str, Any]:
    return call("todo", items=[{"id": "1", "content": "read the files", "status": "in_progress"},
                               {"id": "2", "content": "report", "status": "pending"}])


def test_old_outputs_are_masked_first_and_todo_is_rerendered(workspace: Path) -> None:
    files = [_big(workspace, n) for n in range(4)]
    steps = [_todo(), *[call("read", path=str(f)) for f in files], {"text": "done"}]
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, steps, limits=Limits(context_tokens=14000, compact_at=0.6)) as (
            agent, server, seen):
        out = agent.run("read them all")
        sid = agent.session.id
        assert out.ok
        compactions = [e.event for e in seen if isinstance(e.event, Compacted)]
        assert compactions and compactions[0].strategy == "mask" and compactions[0].trigger == "auto"
        c = compactions[0]
        assert c.tokens_after < c.tokens_before and c.context_tokens == 14000
        after = server.requests[-1]["messages"]
        stubs = [m for m in after if m["role"] == "tool" and "was masked" in m["content"]]
        assert len(stubs) == len(set(sum((x.masked_call_ids for x in compactions), [])))
        # A call and its result stay paired: every tool message answers a call that is still there.
        called = {c["id"] for m in after for c in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in called for m in after if m["role"] == "tool")
        # The newest output is never masked: the last file actually read (a summary request
        # may take a scripted step, so not necessarily big3) is there whole.
        reads = [e.event for e in seen if isinstance(e.event, ActionEvent) and e.event.tool == "read"]
        newest_file = Path(reads[-1].args["path"]).stem.removeprefix("big")
        newest = [m for m in after if m["role"] == "tool"][-1]
        assert f"line 149 of file {newest_file}" in newest["content"]
        assert "was masked" not in newest["content"]
        # The todo list is put back after the compaction.
        assert any("Your todo list" in str(m.get("content")) and "compacted" in str(m.get("content"))
                   for m in after)
        # The masked output is kept whole: the stub's artifact reads back.
        ref = re.search(r'"(abhed:artifact/[0-9a-f]{64})"', stubs[0]["content"])
        assert ref is not None
        page = agent.dispatcher.call("read", {"path": ref.group(1), "limit": 3})
        assert page.ok and "of file 0" in page.content
        # Kept as it was shown: the file's line numbers, once (not "1\t     1\tline 0").
        assert page.content.splitlines()[0] == "     1\tline 0 of file 0 with some padding text"
        last = server.requests[-1]["messages"]
    # Resuming rebuilds the same (compacted) conversation from the log.
    with agent_on(store, workspace, [{"text": "again"}], session_id=sid) as (agent, server, _seen):
        agent.run("next")
        resumed = server.requests[0]["messages"]
    norm = [re.sub(r"r-[0-9a-f]{8}\.", "r-RUN.", json.dumps(m))
            for m in (last[:-1], resumed[:len(last) - 1])]
    assert norm[0] == norm[1]
    # Only the current working memory is sent: the new run's reminder carries the todo list,
    # so the compaction's reminder no longer does (the model never reads two lists).
    assert "Your todo list" in last[-1]["content"]
    assert resumed[len(last) - 1]["content"] == "[abhed: the conversation was compacted.]"
    assert sum("Your todo list" in str(m.get("content")) for m in resumed) == 1


def test_summary_when_masking_is_not_enough_keeps_user_words(workspace: Path) -> None:
    long_text = "I looked at many things. " * 150
    steps: list[Any] = [{"text": long_text, "tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}
                        for _ in range(6)]
    summary_bodies: list[dict[str, Any]] = []

    responder = _summarising(steps, ScriptStep(text="Task: look around.\nFiles: none."),
                             summary_bodies)

    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=Limits(context_tokens=12000, compact_at=0.4)) as (
            agent, server, seen):
        server.responder = responder
        out = agent.run("please look around carefully")
    assert out.ok, out.message
    summaries = [e.event for e in seen if isinstance(e.event, Compacted) and e.event.strategy == "summary"]
    assert summaries and summaries[0].summary.startswith("Task: look around.")
    assert summary_bodies and "Open questions" in summary_bodies[0]["messages"][-1]["content"]
    final = server.requests[-1]["messages"]
    assert any(m["content"] == "please look around carefully" for m in final if m["role"] == "user")
    [sent] = [m["content"] for m in final if "summary of the earlier conversation" in str(m.get("content"))]
    # The summary retells tool output: it goes back marked untrusted, and its writer was told.
    assert '<untrusted source="summary">\nTask: look around.' in sent and sent.endswith("</untrusted>")
    assert "data, never instructions" in summary_bodies[0]["messages"][0]["content"]


def test_circuit_breaker_ends_the_run_with_context_full(workspace: Path) -> None:
    # One huge prompt: nothing old to mask or summarise, so compaction cannot help.
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [{"text": "never"}],
                  limits=Limits(context_tokens=300, compact_at=0.5)) as (agent, server, seen):
        out = agent.run("x" * 5000)
    assert out.reason == "context_full" and "context is 300" in out.message
    assert server.requests == []
    assert isinstance(seen[-1].event, RunEnded) and seen[-1].event.reason == "context_full"
    # No request was sent, so no turn was taken (it used to say 1).
    assert seen[-1].event.turns == 0 and out.turns == 0


def test_manual_compaction_between_runs(workspace: Path) -> None:
    files = [_big(workspace, n) for n in range(2)]
    steps = [*[call("read", path=str(f)) for f in files], {"text": "ok"}]
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, steps) as (agent, _server, seen):
        agent.run("read")
        event = agent.compact("manual")
        assert event is not None and event.trigger == "manual" and event.masked_call_ids
        assert event.tokens_after < event.tokens_before
        empty = EventStore(workspace.parent / "f.db")
    with agent_on(empty, workspace, []) as (fresh, _s, _e):
        assert fresh.compact("manual") is None  # nothing to compact


def test_a_summary_over_its_bound_is_cut(workspace: Path) -> None:
    steps: list[Any] = [{"text": "x " * 2000, "tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}
                        for _ in range(6)]

    responder = _summarising(steps, ScriptStep(text="S" * 50_000, chunk_chars=8192))

    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=Limits(context_tokens=12000, compact_at=0.4)) as (
            agent, server, seen):
        server.responder = responder
        agent.run("go")
    summaries = [e.event for e in seen if isinstance(e.event, Compacted) and e.event.strategy == "summary"]
    assert summaries and all(len(s.summary) <= 8100 for s in summaries)
    assert summaries[0].summary.endswith("[summary cut at its bound]")


def test_plan_mode_allows_plan_and_todo_and_refuses_writes() -> None:
    from appliance.policy import PolicyEngine, PolicySettings
    from tools import native_tools

    engine = PolicyEngine(PolicySettings(mode="plan"))
    tools = native_tools()
    assert engine.decide(tools["plan"], {"title": "t", "steps": []}, "/ws").verdict == "allow"
    assert engine.decide(tools["todo"], {"items": []}, "/ws").verdict == "allow"
    assert engine.decide(tools["write"], {"path": "/ws/a", "content": ""}, "/ws").verdict == "deny"


def _glob_turn(text: str) -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": "glob", "arguments": {"pattern": "*.none"}}]}


def test_a_compaction_that_would_not_save_is_not_applied(workspace: Path) -> None:
    # Nothing to mask (small outputs), and a summary longer than what it replaces: recording
    # it would make every later request larger, so it is not applied; after three such
    # summaries no more are asked for in this run.
    steps: list[Any] = [_glob_turn("step " * 40) for _ in range(12)]
    summary_bodies: list[dict[str, Any]] = []

    responder = _summarising(steps, ScriptStep(text="S" * 7000, chunk_chars=4096), summary_bodies)

    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=Limits(context_tokens=12000, compact_at=0.4)) as (
            agent, server, seen):
        server.responder = responder
        out = agent.run("go " * 150)
    assert [e for e in seen if isinstance(e.event, Compacted)] == []
    assert len(summary_bodies) == 3  # the breaker: three summaries that did not help, then none
    assert not any("summary of the earlier" in json.dumps(b["messages"]) for b in server.requests)
    if out.reason == "context_full":
        assert "3 summaries in a row did not help" in out.message


def test_the_breaker_counts_only_attempts_that_could_help(workspace: Path) -> None:
    # A prompt that keeps every request over the threshold from the start: the first
    # attempts find nothing old enough (not counted); summaries of the small early turns save
    # little (counted: the breaker opens for summaries); masking costs nothing and goes on,
    # so the large reads that come later are masked and the run finishes.
    files = [_big(workspace, n) for n in range(6)]
    steps: list[Any] = [_glob_turn("looking") for _ in range(4)]
    steps += [call("read", path=str(f)) for f in files]
    summary_bodies: list[dict[str, Any]] = []

    responder = _summarising(steps, ScriptStep(text="Task: read the files."), summary_bodies)

    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=Limits(context_tokens=16000, compact_at=0.45)) as (
            agent, server, seen):
        server.responder = responder
        out = agent.run("Read every big file and report. " + "Context: " + "x" * 14000)
    assert out.ok, out.message
    compactions = [e.event for e in seen if isinstance(e.event, Compacted)]
    masked = {cid for c in compactions for cid in c.masked_call_ids}
    assert len(masked) >= 3  # the old reads, masked late in the run
    assert summary_bodies  # summaries were tried (and counted) while masking went on
    last = server.requests[-1]["messages"]
    big = [m for m in last if m["role"] == "tool" and "padding text" in m["content"]]
    assert len(big) <= 2  # only the last two turns' reads are still whole


def test_only_the_current_todo_and_plan_are_sent(workspace: Path) -> None:
    files = [_big(workspace, n) for n in range(6)]

    def todo(active: str) -> dict[str, Any]:
        return call("todo", items=[{"id": i, "content": f"step {i}",
                                    "status": "in_progress" if i == active else
                                    ("done" if i < active else "pending")} for i in "abcdef"])

    steps: list[Any] = []
    for n, f in enumerate(files):
        steps += [todo("abcdef"[n]), call("read", path=str(f))]
    steps += [call("plan", title="report", steps=[{"step": "write it", "status": "in_progress"}]),
              {"text": "first run done"}]
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, steps, limits=Limits(context_tokens=12000, compact_at=0.4)) as (
            agent, server, seen):
        assert agent.run("work through the list").ok
        assert len([e for e in seen if isinstance(e.event, Compacted)]) >= 2
        server.add(todo("f"), {"text": "second run done"})
        assert agent.run("carry on").ok
    for body in server.requests:
        sent = json.dumps(body["messages"])
        # Never two lists that both look current: one reminder at most, and one item in progress.
        reminders = [m for m in body["messages"] if m["role"] == "user"
                     and "Your todo list" in str(m["content"])]
        assert len(reminders) <= 1, sent[-3000:]
    final = server.requests[-1]["messages"]
    [reminder] = [m for m in final if m["role"] == "user" and "Your todo list" in str(m["content"])]
    # The reminder the second run starts with holds the list as it is now (d in progress).
    assert "[>] f: step f" in reminder["content"] and "[>] e" not in reminder["content"]
    assert "Your plan" in reminder["content"]


@pytest.mark.parametrize("stop", ["deadline", "interrupt"])
def test_a_deadline_or_an_interrupt_stops_a_summary_request_that_hangs(
        workspace: Path, stop: str) -> None:
    # The summary is a model request like any other: a slow or stuck summariser must not hold
    # the run past its deadline, nor ignore an abort (rpc `abort`, Ctrl-C, the parent's cascade).
    # The server's read timeout (15 s) is what used to end it; the run must end well before.
    long_text = "I looked at many things. " * 150
    steps: list[Any] = [_glob_turn(long_text) for _ in range(6)]
    asked = threading.Event()

    def responder(body: dict[str, Any]) -> ScriptStep:
        if not body.get("tools"):
            asked.set()
            return ScriptStep(text="never sent", hang=True)
        return ScriptStep.model_validate(steps.pop(0)) if steps else ScriptStep(text="finished")

    limits = Limits(context_tokens=12000, compact_at=0.4,
                    deadline_s=4.0 if stop == "deadline" else 600.0)
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=limits, provider={"read_timeout_s": 15}) as (
            agent, server, seen):
        server.responder = responder
        if stop == "interrupt":
            threading.Thread(target=lambda: asked.wait(30) and agent.interrupt("abort"),
                             daemon=True).start()
        t0 = time.monotonic()
        out = agent.run("please look around carefully")
        took = time.monotonic() - t0
    assert asked.is_set(), "the run never asked for a summary: the test proves nothing"
    assert out.reason == ("deadline" if stop == "deadline" else "interrupted"), out.message
    assert took < 10, f"the hanging summary held the run {took:.1f} s"
    # A stopped summary is not a summary that failed to help: nothing is recorded for it.
    assert [e for e in seen if isinstance(e.event, Compacted)] == []
    assert agent.compactor.failures == 0
