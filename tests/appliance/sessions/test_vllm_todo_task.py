"""todo and task against the real vLLM CPU server (the tiny model, named tool choice).

The tiny model's random weights write schema-valid arguments only under a
named tool choice, so each model turn that must call a tool is forced: the
parent's first turn calls ``todo`` (one run) or ``task`` (another), and the
child's first turn calls ``glob``, a real tool call in the child's own
session.  What is checked is what the log records, not what the model meant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from appliance.compose import load_config, start_agent
from appliance.events import (
    ActionEvent,
    EventStore,
    ObservationEvent,
    SessionStarted,
    TaskEnded,
    TaskStarted,
    TodoUpdated,
)
from appliance.loop import TaskSettings
from tests.vllm_server import SERVED, shared_vllm

pytestmark = pytest.mark.slow


def _named(tool: str) -> dict[str, object]:
    return {"type": "function", "function": {"name": tool}}


def _config(home: Path) -> Path:
    server = shared_vllm()
    provider = {"name": "local-vllm", "api": "openai", "base_url": server.base_url, "model": SERVED,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 256}}
    path = home / "config.json"
    path.write_text(json.dumps({"custom_providers": [provider], "loop": {"max_turns": 4}}))
    return path


def _run(home: Path, workspace: Path, prompt: str, *, first_tool: str,
         child_first_tool: str | None = None,
         tasks: TaskSettings | None = None) -> tuple[EventStore, str, list[Any]]:
    """Run ``prompt`` once on the real model, its first turn (and each child's, if named)
    forced to call the tool named: the store, the session and the session's events."""
    config = load_config(_config(home))
    if tasks is not None:
        config = config.model_copy(update={"tasks": tasks})
    store = EventStore(home / "state" / "events.db")
    child = _named(child_first_tool) if child_first_tool is not None else None
    agent = start_agent(config, store, workspace, door="test", mode="auto",
                        first_tool_choice=_named(first_tool),
                        child_first_tool_choice=child).agent
    try:
        agent.run(prompt)
        sid = agent.session.id
    finally:
        agent.close()
    return store, sid, [e.event for e in store.events(sid)]


def test_real_model_calls_todo_and_it_is_recorded(abhed_home: Path, workspace: Path) -> None:
    store, _, events = _run(abhed_home, workspace, "plan the work as a todo list",
                            first_tool="todo")
    action = next(e for e in events if isinstance(e, ActionEvent))
    obs = next(e for e in events if isinstance(e, ObservationEvent) and e.call_id == action.call_id)
    assert action.tool == "todo" and obs.tool == "todo"
    todos = [e for e in events if isinstance(e, TodoUpdated)]
    # A list the rules refuse (two in_progress, say) is recorded as refused and changes nothing.
    assert (len(todos) == 1 and todos[0].call_id == action.call_id) if obs.result.ok else todos == []
    if not obs.result.ok:
        assert obs.result.error is not None and obs.result.error.code == "invalid_arguments"
    assert store.verify()[0] > 0


def test_real_model_spawns_a_task_whose_child_makes_a_real_tool_call(
        abhed_home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    store, sid, events = _run(abhed_home, workspace, "find the notes file with a subagent",
                              tasks=TaskSettings(default_max_turns=2), first_tool="task",
                              child_first_tool="glob")
    action = next(e for e in events if isinstance(e, ActionEvent))
    assert action.tool == "task"
    obs = next(e for e in events if isinstance(e, ObservationEvent) and e.call_id == action.call_id)
    if obs.result.error is not None and obs.result.error.code == "invalid_arguments":
        pytest.fail(f"the model's task arguments were refused: {obs.result.content}")
    started = next(e for e in events if isinstance(e, TaskStarted))
    ended = next(e for e in events if isinstance(e, TaskEnded))
    assert started.call_id == ended.call_id == action.call_id
    child = [e.event for e in store.events(started.child_session_id)]
    head = child[0]
    assert isinstance(head, SessionStarted) and head.parent_session_id == sid
    assert head.parent_call_id == action.call_id
    glob = next(e for e in child if isinstance(e, ActionEvent))
    glob_obs = next(e for e in child if isinstance(e, ObservationEvent) and e.call_id == glob.call_id)
    assert glob.tool == "glob" and glob_obs.result.content
    assert obs.result.details["child_session_id"] == started.child_session_id
    assert store.verify()[0] > 0
