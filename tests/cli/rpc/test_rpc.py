"""``abhed rpc`` against the scripted server: the protocol, in-process and as a subprocess."""

from __future__ import annotations

import io
import json
from pathlib import Path

from appliance.compose import load_config
from appliance.events import EventStore
from cli.rpc import MAX_LINE_BYTES, RpcServer
from models.scripted import ScriptedServer
from tests.appliance.helpers import RpcClient as Client
from tests.appliance.helpers import write_config
from tests.helpers import wait_for


def test_start_prompt_events_and_ids(server: ScriptedServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "a.txt")}}]},
               {"text": "alpha it is"})
    c = Client("--workspace", str(workspace))
    c.send(id="s1", method="start", mode="auto")
    started = c.until(lambda m: m["type"] == "response")
    assert started["id"] == "s1" and started["ok"] and started["session_id"].startswith("s-")
    assert started["tools"] == sorted(started["tools"])
    c.send(id=7, method="prompt", prompt="read a.txt")
    assert c.until(lambda m: m["type"] == "response")["id"] == 7
    obs = c.event("observation")
    assert obs["tool"] == "read" and obs["result"]["ok"]
    end = c.event("run_ended")
    assert end["reason"] == "done" and end["answer"] == "alpha it is"
    assert c.close() == 0


def test_malformed_lines_get_error_lines_and_the_connection_survives(server: ScriptedServer,
                                                                   workspace: Path) -> None:
    c = Client("--workspace", str(workspace))
    bad = [b"not json\n", b"\xff\xfe garbage\n", b"[1,2]\n", b'{"method": 5}\n', b'{"id": {"x": 1}, "method": "start"}\n',
           b'{"method": "prompt", "prompt": "x"}\n', b'{"method": "frobnicate", "id": 3}\n',
           b'{"method": "start", "mode": "yolo"}\n', b'{"method": "approve", "request_id": "ap-9", "decision": "allow"}\n']
    for line in bad:
        c.raw(line)
    codes = [c.until(lambda m: m["type"] == "error")["error"]["code"] for _ in bad]
    assert codes == ["parse_error", "parse_error", "invalid_request", "unknown_method", "invalid_request",
                     "not_started", "unknown_method", "invalid_params", "unknown_request"]
    c.send(id=1, method="start")
    assert c.until(lambda m: m["type"] == "response")["ok"]
    c.send(id=2, method="start")
    assert c.until(lambda m: m["type"] == "error")["error"]["code"] == "already_started"
    c.send(id=3, method="steer", text="hello")
    assert c.until(lambda m: m["type"] == "error")["error"]["code"] == "not_running"
    assert c.close() == 0


def test_oversized_line_is_skipped_with_an_error(server: ScriptedServer, workspace: Path) -> None:
    store = EventStore(workspace.parent / "ev.db")
    big = b'{"method": "start", "pad": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n'
    inp = io.BytesIO(big + b'{"id": 1, "method": "shutdown"}\n')
    out = io.StringIO()
    assert RpcServer(load_config(), store, inp, out, workspace=workspace).serve() == 0
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0]["error"]["code"] == "line_too_long" and lines[1]["method"] == "shutdown"
    store.close()


def test_a_line_nested_past_the_recursion_limit_gets_an_error_and_the_server_lives(
        server: ScriptedServer, workspace: Path) -> None:
    """It killed the server with a RecursionError traceback (review 2226)."""
    store = EventStore(workspace.parent / "ev.db")
    inp = io.BytesIO(b"[" * 100_000 + b'\n{"id": 1, "method": "shutdown"}\n')
    out = io.StringIO()
    assert RpcServer(load_config(), store, inp, out, workspace=workspace).serve() == 0
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0]["error"]["code"] == "parse_error" and "nests too deeply" in lines[0]["error"]["message"]
    assert lines[1]["method"] == "shutdown"
    store.close()


def test_abort_stops_a_hanging_run(server: ScriptedServer, workspace: Path) -> None:
    server.add({"hang": True})
    c = Client("--workspace", str(workspace))
    c.send(method="start")
    c.send(method="prompt", prompt="x")
    c.event("user_message")
    wait_for(lambda: server.requests, 30, what="the model request")
    c.send(id="a", method="abort")
    resp = c.until(lambda m: m["type"] == "response" and m["id"] == "a")
    assert resp["aborted"] is True
    end = c.event("run_ended")
    assert end["reason"] == "interrupted" and "rpc abort" in end["message"]
    assert c.close() == 0


def test_busy_and_steer_during_a_run(server: ScriptedServer, workspace: Path) -> None:
    server.add({"text": "slow " * 20, "chunk_chars": 5, "delay_s": 0.05}, {"text": "after steer"})
    c = Client("--workspace", str(workspace))
    c.send(method="start")
    c.send(method="prompt", prompt="first")
    c.event("user_message")
    c.send(id="p2", method="prompt", prompt="second")
    assert c.until(lambda m: m["type"] == "error")["error"]["code"] == "busy"
    c.event("run_ended")
    assert c.close() == 0


def test_ask_mode_round_trip_allow_and_deny(server: ScriptedServer, workspace: Path) -> None:
    a, b = workspace / "a.txt", workspace / "b.txt"
    server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(a), "content": "A"}},
                               {"name": "write", "arguments": {"path": str(b), "content": "B"}}]},
               {"text": "done"})
    c = Client("--workspace", str(workspace))
    c.send(method="start", mode="ask")
    c.send(method="prompt", prompt="write two files")
    first = c.until(lambda m: m["type"] == "approval_request")
    assert first["tool"] == "write" and first["args"]["path"] == str(a)
    c.send(id=1, method="approve", request_id=first["request_id"], decision="allow")
    second = c.until(lambda m: m["type"] == "approval_request")
    c.send(id=2, method="approve", request_id=second["request_id"], decision="deny", reason="not b")
    end = c.event("run_ended")
    assert end["reason"] == "done"
    assert a.read_text() == "A" and not b.exists()
    assert c.close() == 0


def test_start_failure_is_an_error_line(abhed_home: Path, workspace: Path) -> None:
    write_config(abhed_home, "http://127.0.0.1:9/v1", sampling=["temperature"], params={"temperature": 0},
                 catalog_entry="missing")
    c = Client("--workspace", str(workspace))
    c.send(id=1, method="start")
    err = c.until(lambda m: m["type"] == "error")
    assert err["id"] == 1 and err["error"]["code"] == "start_failed"
    assert c.close() == 0


def test_deltas_stream_before_the_turn_and_can_be_turned_off(server: ScriptedServer, workspace: Path) -> None:
    server.add({"text": "streamed in pieces", "chunk_chars": 4}, {"text": "quiet"})
    c = Client("--workspace", str(workspace))
    c.send(id=1, method="start")
    c.until(lambda m: m["type"] == "response")
    c.send(id=2, method="prompt", prompt="hi")
    pieces: list[str] = []
    while True:
        msg = c.until(lambda m: m["type"] in ("delta", "event"))
        if msg["type"] == "delta":
            assert msg["kind"] == "text" and set(msg) == {"type", "kind", "text", "index", "name"}
            pieces.append(msg["text"])
        elif msg["event"]["type"] == "model_turn":
            break
    assert "".join(pieces) == "streamed in pieces" and len(pieces) > 1
    c.event("run_ended")
    assert c.close() == 0
    # Never persisted: the log holds the turn, not its pieces.
    from appliance import events_db_path

    store = EventStore(events_db_path())
    assert "delta" not in {e.event.type for e in store.events()}
    store.close()

    quiet = Client("--workspace", str(workspace))
    quiet.send(id=1, method="start", deltas=False)
    quiet.until(lambda m: m["type"] == "response")
    quiet.send(id=2, method="prompt", prompt="hi")
    seen = []
    while True:
        msg = quiet.until(lambda m: True)
        seen.append(msg["type"])
        if msg["type"] == "event" and msg["event"]["type"] == "run_ended":
            break
    assert "delta" not in seen
    assert quiet.close() == 0
    bad = Client("--workspace", str(workspace))
    bad.send(id=1, method="start", deltas="yes")
    assert bad.until(lambda m: m["type"] == "error")["error"]["code"] == "invalid_params"
    assert bad.close() == 0
