"""task (§8): capability-filtered children, budget reservation, cascade cancel, a harness-computed
result, one file ledger for siblings, child sessions linked in the same log; hostile inputs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from appliance.events import EventStore, ObservationEvent, SessionStarted, TaskEnded, TaskStarted
from appliance.loop import Limits, TaskSettings
from appliance.tasks import SUMMARY_MAX_CHARS
from models.scripted import ScriptStep
from tests.appliance.sessions.helpers import agent_on
from tests.appliance.tasks.scripts import Script, is_child, last_tool, step, task_call
from tests.helpers import wait_for


def _wait(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    wait_for(cond, timeout, what="the subagents to get there")


def _run(workspace: Path, script: Script, prompt: str = "go", *, limits: Limits | None = None,
         tasks: TaskSettings | None = None) -> tuple[Any, EventStore, str]:
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=limits, tasks=tasks or TaskSettings()) as (
            agent, server, _seen):
        server.responder = script
        out = agent.run(prompt)
        return out, store, agent.session.id


def _children(store: EventStore, parent_id: str) -> list[str]:
    return [e.event.session_id for e in store.events(types=("session_started",))
            if isinstance(e.event, SessionStarted) and e.event.parent_session_id == parent_id]


def test_explore_child_gets_read_only_tools_and_a_mutation_is_refused(workspace: Path) -> None:
    (workspace / "a.py").write_text("print('hi')\n")

    def child(body: dict[str, Any]) -> ScriptStep:
        n = sum(m["role"] == "assistant" for m in body["messages"])
        if n == 0:
            return step({"name": "write", "arguments": {"path": str(workspace / "x"), "content": "x"}})
        if n == 1:
            return step({"name": "read", "arguments": {"path": str(workspace / "a.py")}})
        return ScriptStep(text="a.py prints hi")

    script = Script([step(task_call(f"Read {workspace}/a.py and say what it prints.")),
                     ScriptStep(text="It prints hi.")], child)
    out, store, sid = _run(workspace, script)
    assert out.ok and out.answer == "It prints hi."
    child_bodies = [b for b in script.bodies if is_child(b)]
    assert sorted(t["function"]["name"] for t in child_bodies[0]["tools"]) == ["glob", "grep", "read"]
    # The child saw none of the parent's turns: its system prompt, then the task prompt.
    assert [m["role"] for m in child_bodies[0]["messages"]] == ["system", "user"]
    [cid] = _children(store, sid)
    obs = [e.event for e in store.events(cid, types=("observation",))]
    assert isinstance(obs[0], ObservationEvent) and obs[0].result.error is not None
    assert obs[0].result.error.code == "unknown_tool" and not (workspace / "x").exists()
    started = [e.event for e in store.events(sid, types=("task_started", "task_ended"))]
    assert isinstance(started[0], TaskStarted) and started[0].child_session_id == cid
    assert isinstance(started[1], TaskEnded) and started[1].status == "done"
    # The result the parent read is the harness's, then the child's words.
    parent_result = [e.event for e in store.events(sid, types=("observation",))][0]
    assert isinstance(parent_result, ObservationEvent)
    text = parent_result.result.content
    assert "ended: done" in text and "Files it changed: none" in text and cid in text
    assert text.rstrip().endswith("a.py prints hi")


def test_budget_exhaustion_fails_the_spawn_with_the_exact_words(workspace: Path) -> None:
    script = Script([step(task_call("Explore everything.")), ScriptStep(text="ok")],
                    lambda body: ScriptStep(text="never asked"))
    out, store, sid = _run(workspace, script, limits=Limits(max_turns=2))
    res = [e.event for e in store.events(sid, types=("observation",))][0]
    assert isinstance(res, ObservationEvent)
    assert res.result.content.startswith("Budget limit reached")
    assert _children(store, sid) == [] and not any(is_child(b) for b in script.bodies)


def test_child_that_exceeds_its_reservation_ends_with_budget(workspace: Path) -> None:
    read = step({"name": "glob", "arguments": {"pattern": "*"}})
    script = Script([step(task_call("Look.", max_turns=2)), ScriptStep(text="ok")], lambda b: read)
    out, store, sid = _run(workspace, script)
    res = [e.event for e in store.events(sid, types=("observation",))][0]
    assert isinstance(res, ObservationEvent) and res.result.error is not None
    assert res.result.error.code == "budget_limit" and res.result.content.startswith("Budget limit reached")
    assert res.result.details["spent"]["turns"] == 2


def test_interrupt_cancels_running_children_as_a_cascade(workspace: Path) -> None:
    script = Script([step(task_call("One.", "first"), task_call("Two.", "second"))],
                    lambda body: ScriptStep(hang=True))
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, []) as (agent, server, _seen):
        server.responder = script
        box: list[Any] = []
        t = threading.Thread(target=lambda: box.append(agent.run("go")))
        t.start()
        _wait(lambda: sum(is_child(b) for b in script.bodies) == 2)  # both children are waiting
        agent.interrupt("test")
        t.join(60)
        assert not t.is_alive()
        sid = agent.session.id
    assert box[0].reason == "interrupted"
    ended = [e.event for e in store.events(sid, types=("task_ended",))]
    assert sorted(e.status for e in ended if isinstance(e, TaskEnded)) == ["interrupted", "interrupted"]
    for cid in _children(store, sid):
        assert [e.event.reason for e in store.events(cid, types=("run_ended",))] == ["interrupted"]  # type: ignore[union-attr]


def test_a_child_that_never_ends_is_stopped_by_its_reserved_time(workspace: Path) -> None:
    script = Script([step(task_call("Hang.")), ScriptStep(text="I did it myself")],
                    lambda body: ScriptStep(hang=True))
    out, store, sid = _run(workspace, script, tasks=TaskSettings(max_seconds=0.5))
    assert out.ok and out.answer == "I did it myself"
    [ended] = [e.event for e in store.events(sid, types=("task_ended",))]
    assert isinstance(ended, TaskEnded) and ended.status == "deadline"


def test_sibling_stale_edit_is_refused_naming_the_sibling(workspace: Path) -> None:
    f = workspace / "shared.txt"
    f.write_text("v1\n")
    a_edited, b_read = threading.Event(), threading.Event()

    def child(body: dict[str, Any]) -> ScriptStep:
        # The responder runs under the server's lock, so B polls (glob) until A has edited.
        me = "A" if "Task A" in body["messages"][1]["content"] else "B"
        calls = [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []]
        if not calls:
            return step({"name": "read", "arguments": {"path": str(f)}})
        if me == "B":
            b_read.set()
        if "edit" not in calls:
            if (me == "B" and not a_edited.is_set()) or (me == "A" and not b_read.is_set()):
                return step({"name": "glob", "arguments": {"pattern": "*.txt"}})
            return step({"name": "edit", "arguments": {"path": str(f), "old_string": "v1",
                                                        "new_string": f"v1 {me}"}})
        if me == "A":
            a_edited.set()
        return ScriptStep(text=f"{me}: {last_tool(body)[:200]}")

    script = Script([step(task_call("Task A: edit.", "edit a", "general"),
                           task_call("Task B: edit.", "edit b", "general")),
                     ScriptStep(text="ok")], child)
    out, store, sid = _run(workspace, script)
    assert f.read_text() == "v1 A\n"  # B's edit did not clobber A's
    obs = [e.event.result for e in store.events(sid, types=("observation",))
           if isinstance(e.event, ObservationEvent)]
    assert len(obs) == 2, [o.content for o in obs]
    results = {o.content.split("'")[1]: o for o in obs}
    b = results["edit b"]
    assert "file_changed" in b.content or "changed since you last read it" in b.content
    assert "by task 'edit a'" in b.content
    assert results["edit a"].details["files_changed"] == [str(f)]
    assert results["edit b"].details["files_changed"] == []


def test_summary_over_its_bound_is_cut_with_the_child_session_named(workspace: Path) -> None:
    script = Script([step(task_call("Talk a lot.")), ScriptStep(text="ok")],
                    lambda body: ScriptStep(text="word " * 10_000, chunk_chars=4096))
    out, store, sid = _run(workspace, script)
    res = [e.event for e in store.events(sid, types=("observation",))][0]
    assert isinstance(res, ObservationEvent) and res.result.truncated
    [cid] = _children(store, sid)
    assert f"cut at {SUMMARY_MAX_CHARS}" in res.result.content and cid in res.result.content
    assert len(res.result.content) < SUMMARY_MAX_CHARS + 2000


def test_a_one_megabyte_child_prompt_is_refused_before_spawning(workspace: Path) -> None:
    script = Script([step(task_call("x" * 1_000_000)), ScriptStep(text="ok")],
                    lambda body: ScriptStep(text="never"))
    out, store, sid = _run(workspace, script)
    res = [e.event for e in store.events(sid, types=("observation",))][0]
    assert isinstance(res, ObservationEvent) and res.result.error is not None
    assert res.result.error.code == "too_large" and _children(store, sid) == []


def test_malformed_task_calls_teach(workspace: Path) -> None:
    bad = [{"prompt": "x", "description": "d", "agent_type": "hacker"},
           {"prompt": "", "description": "d"}, {"description": "d"},
           {"prompt": "x", "description": "d", "max_turns": 0},
           {"prompt": "x", "description": "d", "tools": ["bash"]}]
    script = Script([step(*({"name": "task", "arguments": a} for a in bad)), ScriptStep(text="ok")],
                    lambda body: ScriptStep(text="never"))
    out, store, sid = _run(workspace, script, limits=Limits(max_repeated_failures=0))
    codes = [e.event.result.error.code for e in store.events(sid, types=("observation",))  # type: ignore[union-attr]
             if isinstance(e.event, ObservationEvent) and e.event.result.error]
    assert codes == ["invalid_arguments"] * len(bad)


def test_task_events_are_documented_json(workspace: Path) -> None:
    script = Script([step(task_call("Look.")), ScriptStep(text="ok")], lambda body: ScriptStep(text="seen"))
    out, store, sid = _run(workspace, script)
    for e in store.events(sid, types=("task_started", "task_ended")):
        body = json.loads(e.event.model_dump_json())
        assert body["call_id"] and body["child_session_id"]


def test_with_the_default_budgets_twenty_concurrent_tasks_all_spawn(workspace: Path) -> None:
    # docs/tools.md: "At most 20 run at once". With the defaults (50 turns, 2M tokens a run)
    # each of 20 siblings gets a fair share instead of the first few taking 20 turns each.
    calls = [task_call(f"Look at part {n}.", f"part {n}") for n in range(20)]
    script = Script([step(*calls), ScriptStep(text="all seen")], lambda body: ScriptStep(text="seen"))
    out, store, sid = _run(workspace, script)
    assert out.ok and out.answer == "all seen"
    ended = [e.event for e in store.events(sid, types=("task_ended",))]
    assert len(_children(store, sid)) == 20
    assert sorted(e.status for e in ended if isinstance(e, TaskEnded)) == ["done"] * 20
    started = [e.event for e in store.events(sid, types=("task_started",))]
    assert all(isinstance(e, TaskStarted) and e.reserved["turns"] >= 2 for e in started)


def test_a_refused_spawn_names_what_is_reserved_and_by_whom(workspace: Path) -> None:
    # Three siblings, two turns to share (4 - 1 spent - 1 kept): the third is refused while
    # the first two hold theirs; the refusal says so instead of "0 tokens left".
    script = Script([step(task_call("One.", "first"), task_call("Two.", "second"), task_call("Three.", "third"))],
                    lambda body: ScriptStep(hang=True))
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], limits=Limits(max_turns=4)) as (agent, server, seen):
        server.responder = script
        box: list[Any] = []
        t = threading.Thread(target=lambda: box.append(agent.run("go")))
        t.start()
        _wait(lambda: any(isinstance(e.event, ObservationEvent) and e.event.result.error is not None
                          and e.event.result.error.code == "budget_limit" for e in list(seen)))
        agent.interrupt("test")
        t.join(60)
    [refusal] = [e.event.result.content for e in seen if isinstance(e.event, ObservationEvent)
                 and e.event.result.error is not None and e.event.result.error.code == "budget_limit"]
    assert refusal.startswith("Budget limit reached")
    assert "has 0 tokens" not in refusal and "Reserved by subagents still running" in refusal
    assert "Left for subagents: 0 turns" in refusal
    held = refusal.split("Reserved by subagents still running: ")[1].split("\n")[0]
    assert held.count("1 turns") == 2 and "(session s-" in held
    assert "spent 1 turns" in refusal


def test_the_harness_result_lists_what_ran_apart_from_what_was_refused(workspace: Path) -> None:
    def child(body: dict[str, Any]) -> ScriptStep:
        n = sum(m["role"] == "assistant" for m in body["messages"])
        commands = ["echo hello", "vim notes.txt"]
        if n < len(commands):
            return step({"name": "bash", "arguments": {"command": commands[n], "description": "try"}})
        return ScriptStep(text="tried both")

    script = Script([step(task_call("Run things.", "run things", "test")), ScriptStep(text="ok")], child)
    store = EventStore(workspace.parent / "e.db")
    with agent_on(store, workspace, [], shell=True, sandbox={"backend": "host"}) as (
            agent, server, _seen):
        server.responder = script
        agent.run("go")
        sid = agent.session.id
    res = [e.event for e in store.events(sid, types=("observation",))][0]
    assert isinstance(res, ObservationEvent)
    text = res.result.content
    assert "Commands it ran: `echo hello` -> exit 0." in text
    assert "Commands refused or not run: `vim notes.txt` -> interactive_command." in text
    assert "exit None" not in text
    ran = {c["command"]: c["ran"] for c in res.result.details["commands"]}
    assert ran == {"echo hello": True, "vim notes.txt": False}
