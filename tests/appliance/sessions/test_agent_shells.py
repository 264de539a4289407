"""Each agent's shell is its own and a deadline stops what runs: through `abhed run` and the
task tool, with real bubblewrap (issue 23: "Agents step on each other", "Limits that do not
limit")."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from appliance.events import EventStore, ObservationEvent, TaskEnded
from models.scripted import ScriptedServer, ScriptStep
from tests.appliance.helpers import abhed, write_config
from tests.appliance.sessions.helpers import agent_on
from tests.appliance.tasks.scripts import Script, is_child, step, task_call

pytestmark = pytest.mark.slow


def _bash(command: str, timeout_ms: int | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"command": command, "description": "run it"}
    if timeout_ms is not None:
        args["timeout_ms"] = timeout_ms
    return {"name": "bash", "arguments": args}


def test_abhed_run_deadline_stops_a_running_command_and_keeps_its_output(
        abhed_home: Path, workspace: Path) -> None:
    with ScriptedServer([{"tool_calls": [_bash("echo before; sleep 20; echo after")]},
                         {"text": "never asked"}]) as server:
        write_config(abhed_home, server.base_url)
        conf = json.loads((abhed_home / "config.json").read_text())
        conf["sandbox"] = {"backend": "bwrap", "kill_grace_s": 0.5}
        (abhed_home / "config.json").write_text(json.dumps(conf))
        t0 = time.monotonic()
        proc = abhed("run", "go", "--workspace", str(workspace), "--deadline-s", "3", "--json",
                     "--mode", "auto")
        took = time.monotonic() - t0
    assert proc.returncode == 3, proc.stderr
    assert took < 15, took  # it used to run the command to its end (21 s)
    events = [json.loads(line)["event"] for line in proc.stdout.splitlines()]
    [obs] = [e for e in events if e["type"] == "observation"]
    assert "before" in obs["result"]["content"] and "after" not in obs["result"]["content"]
    assert "[killed by SIGTERM]" in obs["result"]["content"]
    [end] = [e for e in events if e["type"] == "run_ended"]
    assert end["reason"] == "deadline" and end["turns"] == 1


def test_a_childs_reservation_deadline_stops_its_command_not_its_parent(workspace: Path) -> None:
    def child(body: dict[str, Any]) -> ScriptStep:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return step(_bash("echo child-started; sleep 30; echo child-after"))
        return ScriptStep(text="never reached")

    script = Script([step(task_call("Wait a long time.", "slow child", "test")),
                     step(_bash("echo parent-after-child")), ScriptStep(text="parent done")],
                    child)
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], shell=True, tasks={"max_seconds": 2.0},
                  sandbox={"backend": "bwrap", "kill_grace_s": 0.5}) as (agent, server, _seen):
        server.responder = script
        t0 = time.monotonic()
        out = agent.run("go")
        took = time.monotonic() - t0
        sid = agent.session.id
    assert out.ok and out.answer == "parent done"
    assert took < 15, took  # the child's `sleep 30` was stopped at its 2 s reservation
    [ended] = [e.event for e in store.events(sid, types=("task_ended",))]
    assert isinstance(ended, TaskEnded) and ended.status == "deadline"
    child_obs = [e.event for e in store.events(ended.child_session_id, types=("observation",))]
    assert isinstance(child_obs[0], ObservationEvent)
    assert "child-started" in child_obs[0].result.content
    assert "child-after" not in child_obs[0].result.content
    parent_obs = [e.event.result.content for e in store.events(sid, types=("observation",))
                  if isinstance(e.event, ObservationEvent)]
    assert parent_obs[1].startswith("parent-after-child")  # the parent's shell ran on


def test_children_cd_in_their_own_shells(workspace: Path) -> None:
    for name in ("a", "b"):
        (workspace / name).mkdir()

    def child(body: dict[str, Any]) -> ScriptStep:
        me = "a" if "Task A" in body["messages"][1]["content"] else "b"
        done = sum(m["role"] == "tool" for m in body["messages"])
        if done == 0:
            return step(_bash(f"cd {me}"))
        if done == 1:
            return step(_bash("pwd"))
        return ScriptStep(text=body["messages"][-1]["content"])

    script = Script([step(task_call("Task A.", "in a", "test"), task_call("Task B.", "in b", "test")),
                     step(_bash("pwd")), ScriptStep(text="ok")], child)
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], shell=True, sandbox={"backend": "bwrap"}) as (
            agent, server, _seen):
        server.responder = script
        assert agent.run("go").ok
        sid = agent.session.id
    results = [e.event.result for e in store.events(sid, types=("observation",))
               if isinstance(e.event, ObservationEvent)]
    by_task = {r.details["agent_type"] + r.content.split("'")[1]: r.content for r in results[:2]}
    assert f"{workspace}/a\n" in by_task["testin a"] and f"{workspace}/b\n" in by_task["testin b"]
    assert results[2].content.splitlines()[0] == str(workspace)  # the parent never moved
    assert sum(is_child(b) for b in script.bodies) == 6
