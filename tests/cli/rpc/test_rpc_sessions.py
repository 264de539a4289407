"""rpc undo, redo, compact and mode: what they do, and malformed or ill-timed requests refused."""

from __future__ import annotations

from pathlib import Path

from models.scripted import ScriptedServer
from tests.appliance.helpers import RpcClient as Client


def _error(c: Client) -> str:
    return str(c.until(lambda m: m["type"] in ("error", "response"))["error"]["code"])


def _when_idle(c: Client, req: dict[str, object]) -> dict[str, object]:
    """Send ``req`` once, right after run_ended: the server must not answer ``busy`` then."""
    c.send(**req)
    reply = c.until(lambda m: m["type"] in ("response", "error"))
    assert reply.get("error", {}).get("code") != "busy", reply
    return reply


def test_undo_compact_and_mode_over_rpc(server: ScriptedServer, workspace: Path) -> None:
    f = workspace / "a.txt"
    f.write_text("alpha\n" * 200)
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(f)}}]},
               {"tool_calls": [{"name": "edit", "arguments": {"path": str(f), "old_string": "alpha\n" * 200,
                                                              "new_string": "beta\n"}}]},
               {"text": "done"}, {"text": "planned"})
    c = Client("--workspace", str(workspace))
    c.send(id=1, method="start", mode="plan")
    c.until(lambda m: m["type"] == "response")
    for bad in [{"method": "mode", "mode": "yolo"}, {"method": "mode"}, {"method": "undo", "to_turn": "1"},
                {"method": "undo", "to_turn": True}, {"method": "undo"}]:
        c.send(**bad)
        assert _error(c) in ("invalid_params", "nothing_to_undo")
    c.send(id=2, method="mode", mode="auto")  # the person leaves plan mode
    assert c.until(lambda m: m["type"] == "response")["mode"] == "auto"
    c.send(id=3, method="prompt", prompt="change a.txt")
    c.until(lambda m: m["type"] == "response")
    assert c.event("run_ended")["reason"] == "done"
    assert f.read_text() == "beta\n"
    compacted = _when_idle(c, {"id": 4, "method": "compact"})
    event = compacted["compacted"]
    assert isinstance(event, dict) and event["trigger"] == "manual" and event["masked_call_ids"]
    c.send(id=5, method="undo", to_turn=10**12)
    assert _error(c) == "nothing_to_undo"
    c.send(id=6, method="undo")
    undone = c.until(lambda m: m["type"] == "response")["undo"]
    assert [x["action"] for x in undone["files"]] == ["restored"] and f.read_text() == "alpha\n" * 200
    for bad in [{"method": "redo", "overwrite": "a.txt"}, {"method": "redo", "skip": [1]},
                {"method": "undo", "skip": [""]}, {"method": "redo", "overwrite": ["x" * 5000]},
                {"method": "redo", "skip": ["a"] * 10_001}]:
        c.send(**bad)
        assert _error(c) == "invalid_params"
    c.send(id=7, method="undo")  # nothing left that changed a file
    assert _error(c) == "nothing_to_undo"
    c.send(id=8, method="redo")
    redone = c.until(lambda m: m["type"] == "response")["redo"]
    assert redone["kind"] == "redo" and f.read_text() == "beta\n"
    assert c.event("undo_applied")["kind"] == "undo"  # both went out on the event stream too
    assert c.event("undo_applied")["kind"] == "redo"
    c.send(id=9, method="redo")
    assert _error(c) == "nothing_to_redo"
    assert c.close() == 0


def test_a_prompt_sent_the_moment_run_ended_arrives_is_accepted(server: ScriptedServer,
                                                                 workspace: Path) -> None:
    # Regression: run_ended went out while the run's thread was still returning,
    # so a client that answered it at once was refused as busy.
    server.add(*[{"text": f"answer {i}"} for i in range(12)])
    c = Client("--workspace", str(workspace))
    c.send(id=1, method="start", mode="auto")
    c.until(lambda m: m["type"] == "response")
    for i in range(12):
        c.send(id=10 + i, method="prompt", prompt=f"question {i}")
        reply = c.until(lambda m: m["type"] in ("response", "error"))
        assert reply["type"] == "response" and reply["accepted"], reply
        assert c.event("run_ended")["reason"] == "done"
    assert c.close() == 0
