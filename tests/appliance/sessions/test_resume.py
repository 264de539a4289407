"""A session is a conversation: rebuilt from the event log, byte for byte, across processes;
a crash mid-run resumes with no dangling call; repeated failures end the run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from appliance import Session
from appliance.events import (
    ActionEvent,
    EventStore,
    ModelTurn,
    ObservationEvent,
    RunEnded,
    RunStarted,
    TodoUpdated,
    TurnToolCall,
    UserMessage,
)
from appliance.loop import Limits
from tests.appliance.sessions.helpers import agent_on, call


def _todo(*statuses: str) -> dict[str, Any]:
    return call("todo", items=[{"id": str(n), "content": f"step {n}", "status": s}
                               for n, s in enumerate(statuses, 1)])


def _conversation(store: EventStore, ws: Path, first: list[dict[str, Any]], second: list[dict[str, Any]],
                  *, resume: bool) -> list[Any]:
    """Run two prompts, in one process or two; return the requests of the second."""
    if not resume:
        with agent_on(store, ws, first + second) as (agent, server, _):
            assert agent.run("one").ok
            n = len(server.requests)
            assert agent.run("two").ok
            return server.requests[n:]
    with agent_on(store, ws, first) as (agent, server, _):
        assert agent.run("one").ok
        sid = agent.session.id
    with agent_on(store, ws, second, session_id=sid) as (agent, server, _):
        assert agent.run("two").ok
        return server.requests


def test_resumed_session_sends_the_same_bytes_as_an_uninterrupted_one(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    first = [_todo("in_progress", "pending"), call("read", path=str(workspace / "a.txt")),
             call("read", path=str(workspace / "missing")), {"text": "read it"}]
    second = [{"text": "done"}]
    a = _conversation(EventStore(workspace.parent / "a.db"), workspace, first, second, resume=False)
    b = _conversation(EventStore(workspace.parent / "b.db"), workspace, first, second, resume=True)
    # Run ids are random per run; everything else is byte for byte the same.
    norm = [re.sub(r"r-[0-9a-f]{8}\.", "r-RUN.", json.dumps(r["messages"])) for r in (a[0], b[0])]
    assert norm[0] == norm[1]
    msgs = b[0]["messages"]
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                     "assistant", "user", "user"]
    # The open todo list is put back in front of the model when the next run starts.
    assert "Your todo list" in msgs[-2]["content"] and "[>] 1: step 1" in msgs[-2]["content"]
    assert msgs[-1]["content"] == "two"
    assert "alpha" in msgs[5]["content"]


def test_run_started_says_it_resumed(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [{"text": "hi"}]) as (agent, _, seen):
        agent.run("one")
        sid = agent.session.id
        assert [e.event.resumed for e in seen if isinstance(e.event, RunStarted)] == [False]
    with agent_on(store, workspace, [{"text": "hi"}], session_id=sid) as (agent, _, seen):
        agent.run("two")
        assert [e.event.resumed for e in seen if isinstance(e.event, RunStarted)] == [True]


def _crashed_session(store: EventStore, workspace: Path) -> tuple[str, Path]:
    """A session whose process died after recording a write's action, before its result."""
    target = workspace / "f.txt"
    target.write_text("old\n")
    s = Session.create(store, str(workspace), version="test")
    s.append(RunStarted(session_id=s.id, run_id="r-dead", provider="p", model="m", mode="auto",
                        system_prompt_sha256="x"))
    s.append(UserMessage(session_id=s.id, run_id="r-dead", text="change f"))
    calls = [TurnToolCall(id="r-dead.1.0", name="write",
                          arguments=json.dumps({"path": str(target), "content": "new\n"})),
             TurnToolCall(id="r-dead.1.1", name="bash", arguments='{"command": "make"}')]
    s.append(ModelTurn(session_id=s.id, run_id="r-dead", turn=1, text="", tool_calls=calls,
                       duration_ms=1.0))
    s.append(ActionEvent(session_id=s.id, call_id="r-dead.1.0", tool="write",
                         args={"path": str(target), "content": "new\n"}))
    return s.id, target


def test_interrupted_call_resumes_cleanly_with_its_outcome_reconciled(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid, target = _crashed_session(store, workspace)
    with agent_on(store, workspace, [{"text": "ok"}], session_id=sid) as (agent, server, _seen):
        out = agent.run("continue")
    assert out.ok
    events = [e.event for e in store.events(sid)]
    obs = [e for e in events if isinstance(e, ObservationEvent)]
    assert len(obs) == 1 and obs[0].call_id == "r-dead.1.0"
    assert obs[0].result.error is not None and obs[0].result.error.code == "outcome_unknown"
    assert "does not exist" not in obs[0].result.content and str(target) in obs[0].result.content
    ended = [e for e in events if isinstance(e, RunEnded)]
    assert (ended[0].run_id, ended[0].reason) == ("r-dead", "interrupted")
    # Every call in the history is answered before the new prompt: no dangling call.
    msgs = server.requests[0]["messages"]
    answers = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    assert set(answers) == {"r-dead.1.0", "r-dead.1.1"}
    assert "Outcome unknown" in answers["r-dead.1.0"] and "differs" in answers["r-dead.1.0"]
    # "Not run" is wrapped like every other result: the model reads one shape.
    assert answers["r-dead.1.1"].startswith('<untrusted tool="bash" ok="false" error="not_run">\nNot run')
    # Resuming again does not record the recovery twice.
    with agent_on(store, workspace, [{"text": "ok"}], session_id=sid) as (agent, _, _seen):
        agent.run("again")
    assert sum(isinstance(e.event, ObservationEvent) for e in store.events(sid)) == 1


def test_unknown_outcome_of_an_unapplied_write_says_so(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    sid, target = _crashed_session(store, workspace)
    target.unlink()
    with agent_on(store, workspace, [{"text": "ok"}], session_id=sid) as (agent, _, _seen):
        agent.run("continue")
    obs = [e.event for e in store.events(sid) if isinstance(e.event, ObservationEvent)]
    assert "does not exist" in obs[0].result.content


def test_identical_failures_end_the_run_with_repeated_failure(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    same = call("read", path=str(workspace / "nope.txt"))
    with agent_on(store, workspace, [same] * 10) as (agent, server, seen):
        out = agent.run("go")
    assert out.reason == "repeated_failure" and "3 times in a row" in out.message
    assert len(server.requests) == 3
    assert isinstance(seen[-1].event, RunEnded) and seen[-1].event.reason == "repeated_failure"


def test_repeated_failure_limit_is_configurable_and_can_be_off(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    same = call("read", path=str(workspace / "nope.txt"))
    with agent_on(store, workspace, [same] * 5 + [{"text": "gave up"}],
                  limits=Limits(max_repeated_failures=0)) as (agent, _, _seen):
        assert agent.run("go").reason == "done"
    with agent_on(store, workspace, [same] * 5, limits=Limits(max_repeated_failures=2)) as (agent, _, _s):
        assert agent.run("go").reason == "repeated_failure"


def test_todo_calls_become_typed_events(workspace: Path) -> None:
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [_todo("in_progress", "pending"), _todo("in_progress", "in_progress"),
                                     {"text": "ok"}]) as (agent, _, seen):
        agent.run("go")
    todos = [e.event for e in seen if isinstance(e.event, TodoUpdated)]
    assert len(todos) == 1  # the refused list (two in_progress) changed nothing
    assert [(i.id, i.status) for i in todos[0].items] == [("1", "in_progress"), ("2", "pending")]


def test_agents_md_is_read_when_there_is_no_abhed_md(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Run make test before answering.\n")
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [{"text": "ok"}]) as (agent, server, seen):
        agent.run("go")
    started = next(e.event for e in seen if isinstance(e.event, RunStarted))
    assert started.instructions_file == str(workspace / "AGENTS.md")
    assert "Run make test" in server.requests[0]["messages"][0]["content"]
    (workspace / "ABHED.md").write_text("Use tabs.\n")
    with agent_on(store, workspace, [{"text": "ok"}]) as (agent, server, seen):
        agent.run("go")
    system = server.requests[0]["messages"][0]["content"]
    assert "Use tabs." in system and "Run make test" not in system


def test_resume_tells_the_model_which_jobs_died_and_where_the_shell_is(workspace: Path) -> None:
    from appliance.events import TurnToolCall as Call
    from appliance.loop._history import History
    from tools import ToolResult

    sub = str(workspace / "sub")
    sid = "s-x"
    events: list[Any] = [
        RunStarted(session_id=sid, run_id="r1", provider="p", model="m", mode="auto", system_prompt_sha256="x"),
        ModelTurn(session_id=sid, run_id="r1", turn=1, text="", duration_ms=1.0,
                  tool_calls=[Call(id="r1.1.0", name="bash", arguments="{}"),
                              Call(id="r1.1.1", name="bash", arguments="{}")]),
        ActionEvent(session_id=sid, call_id="r1.1.0", tool="bash", args={"command": "cd sub"}),
        ObservationEvent(session_id=sid, call_id="r1.1.0", tool="bash", duration_ms=1.0,
                         result=ToolResult(ok=True, content="", details={"cwd_after": sub})),
        ActionEvent(session_id=sid, call_id="r1.1.1", tool="bash", args={"command": "make serve"}),
        ObservationEvent(session_id=sid, call_id="r1.1.1", tool="bash", duration_ms=1.0,
                         result=ToolResult(ok=True, content="", details={"background": True,
                                                                         "job_id": "job-1"})),
        RunEnded(session_id=sid, run_id="r1", reason="done", message="", turns=1),
        RunStarted(session_id=sid, run_id="r2", provider="p", model="m", mode="auto",
                   system_prompt_sha256="x", resumed=True),
    ]
    h = History("system", workspace=str(workspace))
    for n, e in enumerate(events, 1):
        h.feed(e, n)
    note = h.messages[-1]["content"]
    assert "job-1 (make serve)" in note and "ended with the old one" in note
    assert f"working directory is {sub}" in note
    assert h.cwd == sub and h.jobs == {}
