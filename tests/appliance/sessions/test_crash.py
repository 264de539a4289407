"""A real `abhed run` killed with SIGKILL in the middle of a `task` call, then resumed: the
model is told what the subagent's events show it changed, and the subagent's run is ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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


def _call(name: str, **args: Any) -> ScriptStep:
    return ScriptStep.model_validate({"tool_calls": [{"name": name, "arguments": args}]})


def test_a_crash_during_a_task_call_is_reconciled_from_the_subagents_events(
        abhed_home: Path, workspace: Path) -> None:
    made = workspace / "made-by-child.txt"
    parent: list[ScriptStep] = [_call("task", prompt=f"Write {made}, then run the slow check.",
                                      description="write and check", agent_type="general")]

    def responder(body: dict[str, Any]) -> ScriptStep:
        if SUBAGENT in body["messages"][0]["content"]:
            done = sum(m["role"] == "tool" for m in body["messages"])
            if done == 0:
                return _call("write", path=str(made), content="from the child\n")
            return _call("bash", command="touch check.started; sleep 300", description="check")
        return parent.pop(0) if parent else ScriptStep(text="noted what the subagent did")

    with ScriptedServer(responder=responder) as server:
        write_config(abhed_home, server.base_url)
        conf = json.loads((abhed_home / "config.json").read_text())
        conf["sandbox"] = {"backend": "bwrap"}
        (abhed_home / "config.json").write_text(json.dumps(conf))
        proc = subprocess.Popen([sys.executable, "-m", "cli", "run", "go", "--mode",
                                 "auto", "--workspace", str(workspace)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=os.environ.copy(), start_new_session=True)
        try:
            wait_for(lambda: (workspace / "check.started").exists() or proc.poll() is not None,
                     60, what="the subagent's command to start")
            assert proc.poll() is None, proc.communicate()
            os.kill(proc.pid, signal.SIGKILL)  # a crash: nothing gets to record an end
            _out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        sid = next(line.split("session: ", 1)[1].split()[0] for line in err.splitlines()
                   if "session: s-" in line)
        before = len(server.requests)
        resumed = abhed("run", "what happened?", "--mode", "auto", "--workspace", str(workspace),
                        "--session", sid)
        assert resumed.returncode == 0, resumed.stderr
        first = server.requests[before]["messages"]
    [answer] = [m["content"] for m in first if m["role"] == "tool"
                and "Outcome unknown" in m["content"] and "task" in m["content"]]
    assert f"Files it changed: {made}" in answer
    assert "Commands cut off when Abhed stopped" in answer and "sleep 300" in answer
    assert "its run is now ended" in answer
    store = EventStore(events_db_path())
    try:
        [ended] = [e.event for e in store.events(sid, types=("task_ended",))]
        assert isinstance(ended, TaskEnded) and ended.status == "interrupted"
        assert ended.files_changed == [str(made)]
        child = [e.event for e in store.events(ended.child_session_id, types=("run_ended",))]
        assert len(child) == 1 and isinstance(child[0], RunEnded) and child[0].reason == "interrupted"
    finally:
        store.close()
