"""A long session as its user lives it (issue 23's "done when"): four real `abhed` processes
over one session, 40+ model turns, a context small enough for several compactions, two
subagents at once (twice), a SIGKILL mid-task and a resume, then an undo chain and a redo.
What the model was shown is checked at every request, and at the steps that matter.

Real parts: the `abhed` CLI and rpc as subprocesses, bubblewrap for bash, SQLite; the model is
the scripted server (the same OpenAI-compatible HTTP a real one speaks). About 25 s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from appliance import events_db_path
from appliance.events import EventStore, RunEnded, TaskEnded
from models.scripted import ScriptedServer, ScriptStep
from tests.appliance.helpers import abhed, write_config
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

SUBAGENT = "You are a subagent"
CONTEXT = 16_000


def _step(*calls: tuple[str, dict[str, Any]], text: str = "") -> ScriptStep:
    return ScriptStep.model_validate(
        {"text": text, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]})


def _todo(active: str, ids: str = "abcdefgh") -> tuple[str, dict[str, Any]]:
    return ("todo", {"items": [{"id": i, "content": f"step {i}", "status": "in_progress"
                                if i == active else ("done" if i < active else "pending")}
                               for i in ids]})


class Model:
    """The parent's replies per run (a queue), the children's from their task prompt."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws
        self.parent: list[ScriptStep] = []
        self.requests: list[dict[str, Any]] = []  # the parent's, as sent
        self.children: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptStep:
        msgs = body["messages"]
        with self.lock:
            if not body.get("tools"):
                self.summaries.append(body)
                return ScriptStep(text="Task: go through the modules.\nState: in progress.")
            if SUBAGENT not in msgs[0]["content"]:
                self.requests.append(body)
                return self.parent.pop(0) if self.parent else ScriptStep(text="nothing left")
            self.children.append(body)
        task, done = msgs[1]["content"], sum(m["role"] == "assistant" for m in msgs)
        ws = self.ws
        plan = {
            "EXPLORE": [_step(("read", {"path": str(ws / "mod0.py")})),
                        _step(("glob", {"pattern": "*.py"}))],
            "GENERAL": [_step(("bash", {"command": "cd sub && pwd", "description": "go"})),
                        _step(("bash", {"command": "pwd", "description": "where"})),
                        _step(("read", {"path": str(ws / "notes.txt")})),
                        _step(("edit", {"path": str(ws / "notes.txt"), "old_string": "v1",
                                        "new_string": "v1 child"}))],
            "SLOW": [_step(("write", {"path": str(ws / "slow.txt"), "content": "slow\n"})),
                     _step(("bash", {"command": "touch slow.started; sleep 120",
                                     "description": "slow check"}))],
        }[task.split()[0]]
        return plan[done] if done < len(plan) else ScriptStep(text=f"{task.split()[0]} done")


def _reads(ws: Path, *mods: int) -> list[ScriptStep]:
    return [_step(("read", {"path": str(ws / f"mod{n}.py")})) for n in mods]


def _result_of(requests: list[dict[str, Any]], marker: str) -> str:
    """The tool message the model was shown for the call whose arguments hold ``marker``."""
    for body in requests:
        ids = {c["id"] for m in body["messages"] for c in m.get("tool_calls") or []
               if marker in c["function"]["arguments"]}
        for m in body["messages"]:
            if m["role"] == "tool" and m["tool_call_id"] in ids:
                return str(m["content"])
    raise AssertionError(f"no result for a call with {marker!r}")


def _check_every_request(requests: list[dict[str, Any]]) -> None:
    """What holds for every request the parent sent, whatever the step."""
    for body in requests:
        msgs = body["messages"]
        sent = len(json.dumps(msgs)) + len(json.dumps(body["tools"]))
        assert sent / 4 < CONTEXT, "a request larger than the model's context was sent"
        reminders = [m for m in msgs if m["role"] == "user" and "Your todo list" in str(m["content"])]
        assert len(reminders) <= 1, "two todo lists that both look current"
        called = {c["id"] for m in msgs for c in m.get("tool_calls") or []}
        for m in msgs:
            if m["role"] == "tool":
                assert m["tool_call_id"] in called  # calls and results stay paired
                # Results, "not run" too, are wrapped; a masked one is Abhed's own stub.
                assert m["content"].startswith(("<untrusted ", "[abhed: the output of this"))
        assert SUBAGENT not in msgs[0]["content"]


def test_a_long_session_through_every_door(abhed_home: Path, workspace: Path) -> None:
    ws = workspace
    for n in range(8):
        (ws / f"mod{n}.py").write_text("".join(f"def f{n}_{i}(x):\n    return x * {i}  # padding\n"
                                               for i in range(90)))
    (ws / "sub").mkdir()
    (ws / "notes.txt").write_text("v1\n")
    model = Model(ws)
    with ScriptedServer(responder=model) as server:
        write_config(abhed_home, server.base_url)
        conf = json.loads((abhed_home / "config.json").read_text())
        conf.update(sandbox={"backend": "bwrap"},
                    loop={"context_tokens": CONTEXT, "compact_at": 0.5})
        (abhed_home / "config.json").write_text(json.dumps(conf))

        # -- process 1: abhed run, 20 turns, two subagents at once -----------------------
        model.parent[:] = [
            _step(_todo("a")), *_reads(ws, 0, 1), _step(_todo("b")), *_reads(ws, 2, 3),
            _step(("task", {"prompt": "EXPLORE the modules", "description": "explore",
                            "agent_type": "explore"}),
                  ("task", {"prompt": "GENERAL go into sub and mark the notes",
                            "description": "mark notes", "agent_type": "general"})),
            _step(("bash", {"command": "pwd", "description": "where am I"})),
            _step(_todo("c")), *_reads(ws, 4, 5, 6),
            _step(("plan", {"title": "finish", "steps": [{"step": "read", "status": "in_progress"},
                                                         {"step": "report", "status": "pending"}]})),
            *_reads(ws, 0),
            _step(("edit", {"path": str(ws / "mod0.py"), "old_string": "def f0_0(x):",
                            "new_string": "def f0_zero(x):"})),
            _step(_todo("d")), *_reads(ws, 7, 1, 2), ScriptStep(text="first part done")]
        first = abhed("run", "go through the modules", "--workspace", str(ws), "--mode", "auto")
        assert first.returncode == 0, first.stderr
        sid = re.search(r"session: (s-\S+)", first.stderr).group(1)  # type: ignore[union-attr]
        run1 = list(model.requests)
        assert len(run1) == 20
        assert first.stderr.count("≋ conversation compacted") >= 3  # shown at this door
        # The children never saw the parent's turns, and each moved only its own shell.
        assert all(len([m for m in b["messages"] if m["role"] == "user"]) == 1
                   for b in model.children)
        general = [b for b in model.children if "GENERAL" in b["messages"][1]["content"]]
        assert f"{ws}/sub\n" in general[-1]["messages"][-5]["content"]  # its `pwd` after `cd`
        pwd = _result_of(run1, "where am I")
        assert pwd.split("\n")[1] == str(ws)  # the parent's shell did not move
        # After compactions the old reads are stubs naming their artifact or summarised (as
        # untrusted data); the newest are whole.
        last = run1[-1]["messages"]
        whole = [m for m in last if m["role"] == "tool" and "# padding" in m["content"]]
        assert len(whole) <= 3 and "def f2_89" in whole[-1]["content"]
        assert any("was masked to save context" in str(m.get("content")) for m in last)
        assert any('<untrusted source="summary">' in str(m.get("content")) for m in last)

        # -- process 2: abhed rpc on the same session, killed during a subagent's command ---
        model.parent[:] = [_step(_todo("e")), *_reads(ws, 3, 4, 5, 6),
                           _step(("task", {"prompt": "EXPLORE again", "description": "explore 2",
                                           "agent_type": "explore"}),
                                 ("task", {"prompt": "SLOW write then check", "description": "slow",
                                           "agent_type": "general"}))]
        n_before = len(model.requests)
        rpc = subprocess.Popen([sys.executable, "-m", "cli", "rpc", "--workspace",
                                str(ws)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
                               start_new_session=True)
        lines: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: lines.extend(json.loads(x) for x in rpc.stdout or []),
                                  daemon=True)
        reader.start()
        assert rpc.stdin is not None
        for req in ({"id": 1, "method": "start", "session": sid, "mode": "auto", "deltas": False},
                    {"id": 2, "method": "prompt", "prompt": "now the rest"}):
            rpc.stdin.write(json.dumps(req) + "\n")
            rpc.stdin.flush()
        try:
            wait_for(lambda: (ws / "slow.started").exists(), 60, what="the slow subagent's command")
            os.kill(rpc.pid, signal.SIGKILL)
            rpc.wait(30)
        finally:
            if rpc.poll() is None:
                os.killpg(rpc.pid, signal.SIGKILL)
            rpc.wait(30)
            reader.join(30)  # it read to the end of what the killed process wrote
            for pipe in (rpc.stdin, rpc.stdout, rpc.stderr):
                if pipe is not None:
                    pipe.close()
        run2 = model.requests[n_before:]
        assert len(run2) == 6
        # Compactions went out on the rpc stream too.
        assert any(x.get("event", {}).get("type") == "compacted" for x in list(lines))
        # The resumed process was reminded of the todo list as it stood (e in progress).
        [reminder] = [m for m in run2[0]["messages"] if "Your todo list" in str(m.get("content"))]
        assert "[>] d: step d" in reminder["content"]

        # -- process 3: abhed run --session after the kill: 17 more turns ---------------------
        model.parent[:] = [_step(_todo("f")), *_reads(ws, 7, 0, 1, 2, 3),
                           _step(("edit", {"path": str(ws / "notes.txt"),
                                           "old_string": "v1 child", "new_string": "v2"})),
                           _step(_todo("g")), *_reads(ws, 4, 5, 6, 7),
                           _step(("read", {"path": str(ws / "slow.txt")})),
                           _step(("write", {"path": str(ws / "report.md"), "content": "ok\n"})),
                           _step(_todo("h")), *_reads(ws, 0), ScriptStep(text="all done")]
        n_before = len(model.requests)
        third = abhed("run", "what happened? then finish", "--workspace", str(ws), "--mode",
                      "auto", "--session", sid)
        assert third.returncode == 0, third.stderr
        run3 = model.requests[n_before:]
        assert len(run3) == 17
        shown = json.dumps(run3[0]["messages"])
        # The crashed task call: what the subagent's events show, its run ended.
        assert "Outcome unknown: this task call was started" in shown
        assert f"Files it changed: {ws}/slow.txt" in shown and "sleep 120" in shown
        assert "its run is now ended" in shown

        # -- undo chain and a redo, then process 4 sees them ---------------------------------
        assert abhed("sessions", "undo", sid).returncode == 0  # run 3: notes v2, report.md
        assert (ws / "notes.txt").read_text() == "v1 child\n" and not (ws / "report.md").exists()
        assert abhed("sessions", "undo", sid).returncode == 0  # run 2: slow.txt
        assert not (ws / "slow.txt").exists()
        assert abhed("sessions", "undo", sid).returncode == 0  # run 1: mod0, notes (the child's)
        assert (ws / "notes.txt").read_text() == "v1\n"
        assert (ws / "mod0.py").read_text().startswith("def f0_0(x):")
        redo = abhed("sessions", "redo", sid)
        assert redo.returncode == 0 and (ws / "notes.txt").read_text() == "v1 child\n"
        model.parent[:] = [ScriptStep(text="understood")]
        n_before = len(model.requests)
        fourth = abhed("run", "anything to add?", "--workspace", str(ws), "--mode", "auto",
                       "--session", sid)
        assert fourth.returncode == 0, fourth.stderr
        told = json.dumps(model.requests[n_before]["messages"])
        assert told.count("the user undid your changes") == 3
        assert told.count("the user redid your changes") == 1

    _check_every_request(model.requests)
    assert len(model.requests) >= 40
    store = EventStore(events_db_path())
    try:
        compacted = list(store.events(sid, types=("compacted",)))
        assert len(compacted) >= 5
        ended = [e.event for e in store.events(sid, types=("task_ended",))]
        assert sorted(e.status for e in ended if isinstance(e, TaskEnded)) == [
            "done", "done", "done", "interrupted"]
        for e in ended:
            assert isinstance(e, TaskEnded)
            runs = [r.event for r in store.events(e.child_session_id, types=("run_ended",))]
            assert len(runs) == 1 and isinstance(runs[0], RunEnded)  # every child's run ended once
    finally:
        store.close()
