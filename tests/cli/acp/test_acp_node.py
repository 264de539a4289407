"""A second, independent client: the protocol's TypeScript SDK (npm) drives one whole turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from models.scripted import ScriptedServer
from tests.cli.acp.helpers import write_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def test_the_typescript_sdk_client_works_a_whole_turn(abhed_home: Path, workspace: Path) -> None:
    sdk = subprocess.run([str(REPO / "scripts" / "acp-node-env")], capture_output=True, text=True,
                         check=True, timeout=600).stdout.strip().splitlines()[-1]
    target = workspace / "hello.txt"
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url, policy={"mode": "ask"})
        server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(target),
                                                                   "content": "hello\n"}}]},
                   {"text": "Wrote hello.txt."})
        out = subprocess.run(["node", str(HERE / "node_client.mjs"), sdk, str(workspace),
                              "write hello.txt", sys.executable, "-m", "cli", "acp"],
                             capture_output=True, text=True, timeout=180, env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["init"]["agentInfo"]["name"] == "abhed" and seen["agentExit"] == 0
    assert seen["done"]["stopReason"] == "end_turn"
    assert seen["asked"] == [{"title": f"write {target}",
                              "options": ["allow_once", "allow_always", "reject"]}]
    kinds = [u["sessionUpdate"] for u in seen["updates"]]
    assert "tool_call" in kinds and "tool_call_update" in kinds
    text = "".join(u["content"]["text"] for u in seen["updates"]
                   if u["sessionUpdate"] == "agent_message_chunk")
    assert text.endswith("Wrote hello.txt.")
    call = next(u for u in seen["updates"] if u["sessionUpdate"] == "tool_call")
    assert call["kind"] == "edit" and call["content"][0]["type"] == "diff"
    assert call["content"][0]["newText"] == "hello\n"
    assert target.read_text() == "hello\n"
