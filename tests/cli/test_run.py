"""``abhed run`` as a real subprocess against the scripted server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from models.scripted import ScriptedServer
from tests.appliance.helpers import abhed, write_config
from tests.helpers import wait_for


def test_run_answers_on_stdout_and_progress_on_stderr(server: ScriptedServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "a.txt")}}]},
               {"text": "It says alpha."})
    proc = abhed("run", "what is in a.txt?", "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "It says alpha.\n"
    assert "→ read" in proc.stderr and "← read: ok" in proc.stderr and "session: s-" in proc.stderr


def test_run_json_prints_one_event_per_line(server: ScriptedServer, workspace: Path) -> None:
    server.add({"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}, {"text": "done"})
    proc = abhed("run", "list", "--workspace", str(workspace), "--json")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert all(line["type"] == "event" for line in lines)
    kinds = [line["event"]["type"] for line in lines]
    # Every event this command made, the session's start-up records included (they are
    # recorded before the run, and --json once began only at run_started).
    start = kinds.index("run_started")
    assert kinds[0] == "session_started" and "decision_basis" in kinds[:start], kinds
    assert set(kinds[:start]) <= {"session_started", "startup_notice", "decision_basis"}, kinds
    assert kinds[-2:] == ["run_ended", "session_ended"] and "action" in kinds and "observation" in kinds
    assert [line["seq"] for line in lines] == sorted(line["seq"] for line in lines)


def test_run_limit_exits_3_with_the_reason(server: ScriptedServer, workspace: Path) -> None:
    server.add(*[{"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}] * 3)
    proc = abhed("run", "loop", "--workspace", str(workspace), "--max-turns", "2")
    assert proc.returncode == 3
    assert "max_turns" in proc.stderr and proc.stdout == ""


def test_run_provider_error_exits_4_with_the_servers_words(server: ScriptedServer, workspace: Path) -> None:
    server.add({"status": 400, "error": "prompt too long for this model"})
    proc = abhed("run", "x", "--workspace", str(workspace))
    assert proc.returncode == 4 and "prompt too long for this model" in proc.stderr


def test_run_refuses_undeclared_sampling_before_any_request(server: ScriptedServer, workspace: Path) -> None:
    proc = abhed("run", "x", "--workspace", str(workspace), "--sampling", "top_k=5")
    assert proc.returncode == 2
    assert "'top_k'" in proc.stderr and "[temperature, seed]" in proc.stderr
    assert server.requests == []


def test_run_refuses_out_of_range_sampling(server: ScriptedServer, workspace: Path) -> None:
    proc = abhed("run", "x", "--workspace", str(workspace), "--sampling", "temperature=-1")
    assert proc.returncode == 2 and "temperature = -1" in proc.stderr and ">= 0" in proc.stderr


def test_run_unknown_model_and_provider(server: ScriptedServer, workspace: Path) -> None:
    proc = abhed("run", "x", "--workspace", str(workspace), "--model", "gpt-9")
    assert proc.returncode == 2 and "gpt-9" in proc.stderr and "scripted" in proc.stderr
    proc = abhed("run", "x", "--workspace", str(workspace), "--provider", "nope")
    assert proc.returncode == 2 and "no provider named 'nope'" in proc.stderr


def test_run_with_no_server_says_how_to_start_one(abhed_home: Path, workspace: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    write_config(abhed_home, f"http://127.0.0.1:{port}/v1")
    proc = abhed("run", "x", "--workspace", str(workspace))
    assert proc.returncode == 4 and "abhed serve" in proc.stderr


def test_run_unknown_api_is_refused_at_startup(abhed_home: Path, workspace: Path) -> None:
    write_config(abhed_home, "http://127.0.0.1:9/v1", api="anthropic")
    proc = abhed("run", "x", "--workspace", str(workspace))
    assert proc.returncode == 2 and "api 'anthropic' is not supported" in proc.stderr


def test_run_ctrl_c_interrupts_and_records_it(server: ScriptedServer, workspace: Path) -> None:
    server.add({"hang": True})
    p = subprocess.Popen([sys.executable, "-m", "cli", "run", "x", "--workspace", str(workspace),
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    for line in p.stdout:
        if json.loads(line)["event"]["type"] == "user_message":
            break
    wait_for(lambda: server.requests, 30, what="the model request")
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    last = json.loads(rest.splitlines()[-2])["event"]
    assert last["type"] == "run_ended" and last["reason"] == "interrupted"
    assert json.loads(rest.splitlines()[-1])["event"]["type"] == "session_ended"


def test_run_hostile_inputs_are_usage_errors(server: ScriptedServer, workspace: Path) -> None:
    assert abhed("run", "x", "--workspace", str(workspace / "missing")).returncode == 2
    assert abhed("run", "x", "--workspace", str(workspace), "--sampling", "temperature").returncode == 2
    assert abhed("run", "x", "--workspace", str(workspace), "--force-tool", "rm").returncode == 2
    (workspace.parent / "bad.json").write_text("{not json")
    proc = abhed("run", "x", "--workspace", str(workspace), "--config", str(workspace.parent / "bad.json"))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
