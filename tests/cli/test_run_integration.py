"""`abhed run` wires the whole session: policy, extensions (prompt, before_send, veto), sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from models.scripted import ScriptedServer
from tests.helpers import wait_for

EXTENSION = r"""
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    ev = req.get("event")
    if ev == "system_prompt":
        out = {"append": "EXTENSION RULE: never touch secrets."}
    elif ev == "before_send":
        drop = [m["index"] for m in req["messages"]
                if m["role"] == "user" and "DROP-ME" in (m.get("content") or "")]
        out = {"drop": drop}
    elif ev == "tool_call" and req.get("tool") == "write":
        out = {"block": True, "reason": "writes are reviewed by hand here"}
    else:
        out = {}
    print(json.dumps(out), flush=True)
"""


def configure(home: Path, base_url: str, ext: Path, **extra: Any) -> None:
    conf = {
        "custom_providers": [{"name": "local", "api": "openai", "base_url": base_url,
                              "sampling": ["temperature"], "params": {"temperature": 0},
                              "model": "scripted", "max_retries": 0}],
        "extensions": [{"name": "guard", "command": sys.executable, "args": [str(ext)],
                        "timeout_ms": 10000}],
        "sandbox": {"backend": "bwrap"},
        **extra,
    }
    (home / "config.json").write_text(json.dumps(conf))


def abhed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], check=False,
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())


def events(sid: str) -> list[dict[str, Any]]:
    out = abhed("sessions", "show", sid, "--json").stdout
    return [json.loads(x) for x in out.splitlines()]


def session_id(stderr: str) -> str:
    return next(line.split("session: ", 1)[1].split()[0] for line in stderr.splitlines()
                if "session: s-" in line)


def test_extension_prompt_drop_and_veto_reach_the_real_run(abhed_home: Path, workspace: Path,
                                                             tmp_path: Path) -> None:
    ext = tmp_path / "guard.py"
    ext.write_text(EXTENSION)
    target = workspace / "out.txt"
    with ScriptedServer([
        {"tool_calls": [{"name": "write", "arguments": {"path": str(target), "content": "x"}}]},
        {"text": "I could not write it."},
    ]) as server:
        configure(abhed_home, server.base_url, ext)
        proc = abhed("run", "please write out.txt DROP-ME", "--workspace", str(workspace))
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    assert not target.exists()
    first = requests[0]["messages"]
    assert "EXTENSION RULE: never touch secrets." in first[0]["content"]
    assert not any("DROP-ME" in (m.get("content") or "") for m in first), first
    evs = events(session_id(proc.stderr))
    decision = next(e for e in evs if e["type"] == "policy_decision")
    assert decision["verdict"] == "deny" and "guard" in decision["decided_by"]
    obs = next(e for e in evs if e["type"] == "observation")
    assert obs["result"]["ok"] is False and "reviewed by hand" in obs["result"]["content"]
    # The user's message is still in the log: dropping only filters what is sent.
    assert any(e["type"] == "user_message" and "DROP-ME" in json.dumps(e) for e in evs)


def test_deny_rule_and_sandboxed_bash_in_a_real_run(abhed_home: Path, workspace: Path,
                                                    tmp_path: Path) -> None:
    ext = tmp_path / "guard.py"
    ext.write_text(EXTENSION)
    with ScriptedServer([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > made.txt; uname -n",
                                                        "description": "make a file"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "curl http://example.com",
                                                        "description": "fetch"}}]},
        {"text": "done"},
    ]) as server:
        configure(abhed_home, server.base_url, ext,
                  policy={"mode": "auto", "deny": [{"tool": "bash", "program": "curl"}]})
        proc = abhed("run", "make a file", "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "made.txt").read_text() == "hi\n"
    evs = events(session_id(proc.stderr))
    results = [e["result"] for e in evs if e["type"] == "observation"]
    assert results[0]["ok"] is True and results[0]["details"]["sandbox"] == "bwrap"
    assert results[1]["ok"] is False
    verdicts = [e["verdict"] for e in evs if e["type"] == "policy_decision"]
    assert verdicts == ["allow", "deny"]


def test_ctrl_c_stops_a_running_bash_command_not_just_the_model(abhed_home: Path, workspace: Path,
                                                                tmp_path: Path) -> None:
    """Regression: an interrupt used to wait for the running tool, here a 300 s command."""
    import signal

    with ScriptedServer([
        {"tool_calls": [{"name": "bash", "arguments": {
            "command": "echo started > started.txt; sleep 300; echo finished > finished.txt",
            "description": "a long build", "timeout_ms": 600000}}]},
        {"text": "never reached"},
    ]) as server:
        conf = {"custom_providers": [{"name": "local", "api": "openai", "base_url": server.base_url,
                                      "sampling": ["temperature"], "model": "scripted",
                                      "max_retries": 0}],
                "sandbox": {"backend": "bwrap"}, "policy": {"mode": "auto"}}
        (abhed_home / "config.json").write_text(json.dumps(conf))
        p = subprocess.Popen([sys.executable, "-m", "cli", "run", "build it",
                              "--workspace", str(workspace), "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ.copy())
        assert p.stdout is not None
        started = workspace / "started.txt"
        for line in p.stdout:
            if json.loads(line)["event"]["type"] == "action":
                break
        wait_for(started.exists, 120, what="the command to start")
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=120)  # the command alone would take 300 s
    assert p.returncode == 130, err
    assert not (workspace / "finished.txt").exists()
    evs = [json.loads(x)["event"] for x in rest.splitlines()]
    obs = next(e for e in evs if e["type"] == "observation")
    assert obs["result"]["details"]["signal"] in (signal.SIGTERM, signal.SIGKILL)
    assert evs[-2]["type"] == "run_ended" and evs[-2]["reason"] == "interrupted"
    assert evs[-1]["type"] == "session_ended"
