"""`abhed run` and `abhed rpc` end to end against the real vLLM serving the tiny model.

The tiny model's random weights write schema-valid arguments under a named
tool choice (see tests/models/tiny_model.py), so a real tool executes and its
events are recorded; then the model stops and the run ends ``done``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.appliance.helpers import RpcClient as Client
from tests.appliance.helpers import abhed
from tests.vllm_server import SERVED, shared_vllm

pytestmark = pytest.mark.slow


def _config(home: Path, **extra: Any) -> None:
    server = shared_vllm()
    provider = {"name": "local-vllm", "api": "openai", "base_url": server.base_url, "model": SERVED,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 64}, **extra}
    (home / "config.json").write_text(json.dumps({"custom_providers": [provider],
                                                  "loop": {"max_turns": 4}}))


def test_abhed_run_executes_a_real_tool_and_records_it(abhed_home: Path, workspace: Path) -> None:
    _config(abhed_home)
    proc = abhed("run", "list the files", "--workspace", str(workspace), "--force-tool", "glob", "--json",
                 timeout=300)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line)["event"] for line in proc.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session_started"  # --json streams the whole session, set-up first
    start = kinds.index("run_started")
    assert kinds[start:start + 2] == ["run_started", "user_message"]
    turn = events[start + 2]
    assert turn["type"] == "model_turn" and turn["tool_calls"][0]["name"] == "glob"
    args = json.loads(turn["tool_calls"][0]["arguments"])
    action = next(e for e in events if e["type"] == "action")
    obs = next(e for e in events if e["type"] == "observation")
    assert action["tool"] == "glob" and action["args"] == args and obs["call_id"] == action["call_id"]
    assert "ok" in obs["result"] and obs["result"]["content"]
    # The run ends, then the session closes.
    assert [e["type"] for e in events[-2:]] == ["run_ended", "session_ended"]
    assert events[-2]["reason"] == "done"
    out = abhed("events", "verify")
    assert out.returncode == 0 and "chain intact" in out.stdout


def test_abhed_rpc_executes_a_real_tool(abhed_home: Path, workspace: Path) -> None:
    _config(abhed_home)
    c = Client("--workspace", str(workspace))
    c.send(id=1, method="start")
    assert c.until(lambda m: m["type"] == "response", timeout=120)["model"] == SERVED
    c.send(id=2, method="prompt", prompt="read the file", tool="read")
    obs = c.until(lambda m: m["type"] == "event" and m["event"]["type"] == "observation", timeout=300)
    assert obs["event"]["tool"] == "read"
    end = c.until(lambda m: m["type"] == "event" and m["event"]["type"] == "run_ended", timeout=300)
    assert end["event"]["reason"] == "done"
    assert c.close() == 0


def test_abhed_run_refuses_unhonoured_and_undeclared_sampling_against_the_real_server(
        abhed_home: Path, workspace: Path) -> None:
    server = shared_vllm()
    (abhed_home / "catalog.json").write_text((server.home / "catalog.json").read_text())
    _config(abhed_home, sampling=["temperature", "min_p"], params={}, catalog_entry="tiny")
    proc = abhed("run", "x", "--workspace", str(workspace))
    assert proc.returncode == 2 and "'min_p'" in proc.stderr and "does not honour" in proc.stderr
    _config(abhed_home)
    proc = abhed("run", "x", "--workspace", str(workspace), "--sampling", "top_p=0.5")
    assert proc.returncode == 2 and "'top_p'" in proc.stderr and "declared list" in proc.stderr


def test_abhed_run_unknown_model_against_the_real_server(abhed_home: Path, workspace: Path) -> None:
    _config(abhed_home)
    proc = abhed("run", "x", "--workspace", str(workspace), "--model", "nope")
    assert proc.returncode == 2 and f"serves: {SERVED}" in proc.stderr
