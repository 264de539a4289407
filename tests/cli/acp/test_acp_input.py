"""Bad input from an ACP client: JSON-RPC errors or a clean end, never a crash or a torn log.

Raw lines over real pipes (no SDK on this side: the SDK's client would not send them).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from appliance import events_db_path
from appliance.events import EventStore
from appliance.events.maintenance import verify_log
from models.scripted import ScriptedServer
from tests.cli.acp.helpers import write_config
from tests.helpers import wait_for


class Raw:
    """``abhed acp`` with a thread reading its lines; ``next`` takes the next one, in order."""

    def __init__(self) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "cli", "acp"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=os.environ.copy())
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.put(json.loads(line))

    def close(self) -> None:
        self.reader.join(10)
        assert self.p.stdout is not None
        self.p.stdout.close()

    def raw(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def call(self, rid: Any, method: str, **params: Any) -> None:
        self.raw(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                             "params": params}).encode() + b"\n")

    def reply(self, rid: Any) -> dict[str, Any]:
        """The response to ``rid`` (notifications before it are skipped)."""
        while True:
            msg = self.lines.get(timeout=60)
            if "method" not in msg and msg.get("id") == rid:
                return msg


def test_bad_lines_get_json_rpc_errors_and_the_connection_lives(abhed_home: Path,
                                                                workspace: Path) -> None:
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url, policy={"mode": "auto"})
        c = Raw()
        c.raw(b"not json\n")
        assert c.reply(None)["error"]["code"] == -32700
        c.raw(b"\xff\xfe garbage\n")
        assert c.reply(None)["error"]["code"] == -32700
        c.raw(b"[1, 2]\n")
        assert c.reply(None)["error"]["code"] == -32600
        c.raw(b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "initialize"}\n')
        assert c.reply(None)["error"]["code"] == -32600
        c.raw(b"[" * 100_000 + b"\n")  # past Python's recursion limit
        assert c.reply(None)["error"]["code"] == -32700
        c.call(1, "frobnicate")
        assert c.reply(1)["error"]["code"] == -32601
        c.call(2, "initialize", protocolVersion=1, clientCapabilities={})
        init = c.reply(2)["result"]
        caps = init["agentCapabilities"]
        assert caps["loadSession"] is True and caps["promptCapabilities"]["image"] is False
        assert init["agentInfo"]["name"] == "abhed"
        c.call(3, "session/new", cwd="relative/dir", mcpServers=[])
        refused = c.reply(3)["error"]
        assert refused["code"] == -32602 and "absolute" in refused["message"]
        c.call(4, "session/prompt", sessionId="s-not-ours", prompt=[{"type": "text", "text": "x"}])
        assert c.reply(4)["error"]["code"] == -32602
        c.call(5, "session/new", cwd=str(workspace), mcpServers=[
            {"name": "evil", "command": "/bin/sh", "args": ["-c", "touch pwned"], "env": []}])
        sid = c.reply(5)["result"]["sessionId"]
        c.call(6, "session/set_mode", sessionId=sid, modeId="yolo")
        assert c.reply(6)["error"]["code"] == -32602
        c.call(7, "session/prompt", sessionId=sid,
               prompt=[{"type": "resource_link", "name": "passwd", "uri": "file:///etc/passwd"}])
        outside = c.reply(7)["error"]
        assert outside["code"] == -32602 and "workspace" in outside["message"]
        # an answer to a permission request never made: ignored, as JSON-RPC responses are
        c.raw(b'{"jsonrpc": "2.0", "id": 77, "result": {"outcome": {"outcome": "selected", '
              b'"optionId": "allow_once"}}}\n')
        c.raw(b"x" * (17 * 1024 * 1024) + b"\n")  # longer than MAX_LINE_BYTES: skipped
        assert "longer than" in c.reply(None)["error"]["message"]
        # the client vanishes mid-turn: the turn is interrupted, recorded, the process ends
        server.add({"hang": True})
        c.call(8, "session/prompt", sessionId=sid, prompt=[{"type": "text", "text": "hang"}])
        wait_for(lambda: server.requests, 60, what="the model request")
        assert c.p.stdin is not None
        c.p.stdin.close()
        assert c.p.wait(60) == 0
        c.close()
    assert not (workspace / "pwned").exists()
    store = EventStore(events_db_path())
    events = [e.event for e in store.events(sid)]
    store.close()
    assert [e.type for e in events][-2:] == ["run_ended", "session_ended"]
    assert events[-2].reason == "interrupted" and "closed the connection" in events[-2].message
    refused_mcp = [e for e in events if e.type == "startup_notice" and e.kind == "mcp_refused"]
    assert "'evil'" in refused_mcp[0].message
    assert verify_log(events_db_path()).ok
