"""The operator's policy binds every door: abhed run, abhed tool, abhed rpc.

With ``"policy": {"mode": "plan"}`` in config, a model (or caller) that
writes a file gets nothing written at any door; a looser mode is refused with
a message naming the setting and the file; the effective mode and who chose
it are recorded; what set-up withheld is said at each door and recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance import events_db_path
from appliance.events import EventStore, RunStarted, StartupNotice
from models.scripted import ScriptedServer
from tests.appliance.helpers import RpcClient, abhed, write_config

UNPINNED = {"name": "fresh", "command": "/bin/true"}  # no tools_sha256: refused before it starts


def _config(home: Path, base_url: str, **sections: Any) -> Path:
    write_config(home, base_url)
    path = home / "config.json"
    conf = json.loads(path.read_text())
    conf.update(sections)
    path.write_text(json.dumps(conf))
    return path


def _write_call(workspace: Path) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write", "arguments": {"path": str(workspace / "made.txt"),
                                                           "content": "x"}}]}


def _logged(kind: type[Any]) -> list[Any]:
    store = EventStore(events_db_path())
    try:
        return [e.event for e in store.events() if isinstance(e.event, kind)]
    finally:
        store.close()


def _run_started() -> list[RunStarted]:
    return _logged(RunStarted)


@pytest.fixture
def server(abhed_home: Path) -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def test_regression_run_mode_default_replaced_the_operators_plan(server: ScriptedServer,
                                                                 abhed_home: Path,
                                                                 workspace: Path) -> None:
    _config(abhed_home, server.base_url, policy={"mode": "plan"})
    server.add(_write_call(workspace), {"text": "done"})
    proc = abhed("run", "make a file", "-w", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / "made.txt").exists()
    assert "plan mode" in server.requests[1]["messages"][-1]["content"]
    assert "mode: plan (operator)" in proc.stderr
    started = _run_started()
    assert [(r.mode, r.mode_chosen_by) for r in started] == [("plan", "operator")]


def test_run_refuses_a_looser_mode_naming_the_setting_and_file(server: ScriptedServer,
                                                               abhed_home: Path,
                                                               workspace: Path) -> None:
    path = _config(abhed_home, server.base_url, policy={"mode": "plan"})
    proc = abhed("run", "make a file", "-w", str(workspace), "--mode", "auto")
    assert proc.returncode == 2
    assert 'policy.mode "plan"' in proc.stderr and str(path) in proc.stderr
    assert "allow_looser_mode" in proc.stderr
    assert server.requests == [] and not (workspace / "made.txt").exists()


def test_run_may_narrow_and_the_operator_may_allow_widening(server: ScriptedServer,
                                                            abhed_home: Path,
                                                            workspace: Path) -> None:
    _config(abhed_home, server.base_url, policy={"mode": "auto"})
    server.add(_write_call(workspace), {"text": "done"})
    assert abhed("run", "x", "-w", str(workspace), "--mode", "plan").returncode == 0
    assert not (workspace / "made.txt").exists()
    _config(abhed_home, server.base_url, policy={"mode": "plan", "allow_looser_mode": True})
    server.add(_write_call(workspace), {"text": "done"})
    assert abhed("run", "x", "-w", str(workspace), "--mode", "auto").returncode == 0
    assert (workspace / "made.txt").read_text() == "x"
    assert [(r.mode, r.mode_chosen_by) for r in _run_started()] == [("plan", "caller"),
                                                                     ("auto", "caller")]


def test_tool_door_takes_the_operator_mode_and_refuses_a_looser_one(server: ScriptedServer,
                                                                    abhed_home: Path,
                                                                    workspace: Path) -> None:
    path = _config(abhed_home, server.base_url, policy={"mode": "plan"})
    args = json.dumps({"path": str(workspace / "made.txt"), "content": "x"})
    plain = abhed("tool", "write", args, "-w", str(workspace), "--yes")
    assert plain.returncode == 0 and json.loads(plain.stdout)["ok"] is False
    assert "plan mode" in json.loads(plain.stdout)["content"]
    looser = abhed("tool", "write", args, "-w", str(workspace), "--mode", "auto")
    assert looser.returncode == 2 and str(path) in looser.stderr
    assert "abhed tool --mode auto: refused" in looser.stderr
    assert not (workspace / "made.txt").exists()


def test_rpc_start_without_mode_takes_the_operator_mode(server: ScriptedServer, abhed_home: Path,
                                                        workspace: Path) -> None:
    path = _config(abhed_home, server.base_url, policy={"mode": "plan"})
    c = RpcClient("--workspace", str(workspace))
    c.send(id=1, method="start", mode="auto")
    refused = c.until(lambda m: m["type"] == "error")
    assert refused["error"]["code"] == "mode_refused" and str(path) in refused["error"]["message"]
    c.send(id=2, method="start")
    started = c.until(lambda m: m["type"] == "response")
    assert started["mode"] == "plan" and started["mode_chosen_by"] == "operator"
    server.add(_write_call(workspace), {"text": "done"})
    c.send(id=3, method="prompt", prompt="make a file")
    assert c.event("run_started")["mode"] == "plan"
    obs = c.event("observation")
    assert obs["result"]["error"]["code"] == "policy_denied"
    c.event("run_ended")
    assert c.close() == 0
    assert not (workspace / "made.txt").exists()


def test_rpc_start_defaults_the_workspace_to_the_process_cwd(server: ScriptedServer,
                                                             abhed_home: Path,
                                                             workspace: Path) -> None:
    _config(abhed_home, server.base_url)
    import os
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "cli", "rpc"], cwd=workspace,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=os.environ.copy() | {"PYTHONPATH": str(Path.cwd())}, text=True)
    out, err = p.communicate('{"id": 1, "method": "start", "mode": "auto"}\n', timeout=60)
    reply = json.loads(out.splitlines()[0])
    assert reply["ok"] and reply["workspace"] == str(workspace), err


def test_startup_refusals_are_said_at_every_door_and_recorded(server: ScriptedServer,
                                                              abhed_home: Path,
                                                              workspace: Path) -> None:
    _config(abhed_home, server.base_url, mcp_servers=[UNPINNED])
    server.add({"text": "done"})
    run = abhed("run", "x", "-w", str(workspace))
    assert run.returncode == 0 and "warning: MCP server 'fresh'" in run.stderr
    tool = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace))
    assert tool.returncode == 0 and "warning: MCP server 'fresh'" in tool.stderr
    c = RpcClient("--workspace", str(workspace))
    c.send(id=1, method="start")
    started = c.until(lambda m: m["type"] == "response")
    kinds = [(n["kind"], n["subject"]) for n in started["notices"] if n["kind"] == "mcp_refused"]
    assert kinds == [("mcp_refused", "fresh")]
    assert c.close() == 0
    notices: list[StartupNotice] = _logged(StartupNotice)
    refused = [n for n in notices if n.kind == "mcp_refused"]
    assert len(refused) == 3 and all("has not been reviewed" in n.message for n in refused)


@pytest.mark.parametrize("mode", [5, True, ["auto"], {"m": 1}, "AUTO", "x" * 10_000])
def test_rpc_start_hostile_modes_are_invalid_params(server: ScriptedServer, abhed_home: Path,
                                                    workspace: Path, mode: Any) -> None:
    _config(abhed_home, server.base_url)
    c = RpcClient("--workspace", str(workspace))
    c.send(id=1, method="start", mode=mode)
    err = c.until(lambda m: m["type"] == "error")
    assert err["error"]["code"] == "invalid_params" and len(err["error"]["message"]) < 300
    assert c.close() == 0
