"""``abhed acp`` driven by the ACP SDK's own client over real pipes, against the scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    AgentPlanUpdate,
    CurrentModeUpdate,
    FileEditToolCallContent,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from appliance import events_db_path
from appliance.events import EventStore, verify_log
from models import ScriptedServer
from tests.cli.acp.helpers import Recorder, connect, prompt, write_config


@pytest.fixture
def server(abhed_home: Path) -> Any:
    with ScriptedServer() as s:
        yield s


def _events(session_id: str) -> list[Any]:
    store = EventStore(events_db_path())
    try:
        return [e.event for e in store.events(session_id)]
    finally:
        store.close()


def test_a_turn_streams_text_tool_calls_diffs_and_the_plan(server: ScriptedServer, abhed_home: Path,
                                                            workspace: Path) -> None:
    write_config(abhed_home, server.base_url, policy={"mode": "auto"})
    a, b = workspace / "a.txt", workspace / "b.txt"
    a.write_text("alpha\nbeta\n")
    server.add({"tool_calls": [{"name": "todo", "arguments": {"items": [
                   {"id": "1", "content": "read a", "status": "in_progress"},
                   {"id": "2", "content": "change it", "status": "pending"}]}}]},
               {"tool_calls": [{"name": "read", "arguments": {"path": str(a)}}]},
               {"tool_calls": [{"name": "edit", "arguments": {"path": str(a), "old_string": "beta",
                                                              "new_string": "gamma"}},
                               {"name": "write", "arguments": {"path": str(b), "content": "new\n"}}]},
               {"text": "Changed a.txt and wrote b.txt.", "chunk_chars": 4})
    rec = Recorder()

    async def go() -> tuple[str, Any]:
        async with connect(rec) as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            assert new.modes is not None and new.modes.current_mode_id == "auto"
            assert [m.id for m in new.modes.available_modes] == ["plan", "ask", "auto"]
            done = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                      prompt=prompt("change a")), 60)
            return new.session_id, done

    sid, done = asyncio.run(go())
    assert done.stop_reason == "end_turn"
    assert a.read_text() == "alpha\ngamma\n" and b.read_text() == "new\n"
    # the answer streamed in pieces, and nothing but it was said as the agent's message

    assert rec.message().endswith("Changed a.txt and wrote b.txt.")
    calls = rec.calls()
    starts = {u.title.split()[0]: u for us in calls.values() for u in us if isinstance(u, ToolCallStart)}
    assert set(starts) == {"todo", "read", "edit", "write"}
    assert starts["read"].kind == "read" and starts["read"].locations[0].path == str(a)
    edit, write = starts["edit"], starts["write"]
    assert edit.kind == "edit" and edit.status == "pending" and edit.title == f"edit {a}"
    diff = edit.content[0]
    assert isinstance(diff, FileEditToolCallContent) and diff.path == str(a)
    assert "beta" in diff.old_text and "gamma" in diff.new_text and edit.locations[0].line == 1
    new_file = write.content[0]
    assert new_file.old_text is None and new_file.new_text == "new\n"
    for us in calls.values():
        assert isinstance(us[-1], ToolCallProgress) and us[-1].status == "completed"
    ended = [u for u in calls[edit.tool_call_id] if isinstance(u, ToolCallProgress)][-1]
    assert any(isinstance(c, FileEditToolCallContent) and "gamma" in c.new_text
               for c in ended.content)
    plan = rec.of(AgentPlanUpdate)[0]
    assert [(e.content, e.status) for e in plan.entries] == [("read a", "in_progress"),
                                                              ("change it", "pending")]
    events = _events(sid)
    assert events[0].settings["door"] == "acp"
    assert [e.type for e in events][-2:] == ["run_ended", "session_ended"]
