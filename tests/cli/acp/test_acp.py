"""``abhed acp`` driven by the ACP SDK's own client over real pipes, against the scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    AgentPlanUpdate,
    AvailableCommandsUpdate,
    FileEditToolCallContent,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from appliance import events_db_path
from appliance.events import EventStore
from models.scripted import ScriptedServer
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
            assert a.read_text() == "alpha\ngamma\n" and b.read_text() == "new\n"
            return new.session_id, done

    sid, done = asyncio.run(go())
    assert done.stop_reason == "end_turn"
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
    assert "beta" in diff.old_text and "gamma" in diff.new_text and edit.locations[0].line == 2
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


def test_slash_commands_undo_and_compact_as_the_tui_does(server: ScriptedServer,
                                                        abhed_home: Path, workspace: Path) -> None:
    write_config(abhed_home, server.base_url, policy={"mode": "auto"})
    a = workspace / "a.txt"
    server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(a), "content": "A\n"}}]},
               {"text": "Wrote it."})
    rec = Recorder()

    async def go() -> str:
        async with connect(rec) as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                               prompt=prompt("write a")), 60)
            assert a.exists()
            for command in ("/undo", "/undo", "/redo", "/compact"):
                done = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                          prompt=prompt(command)), 60)
                assert done.stop_reason == "end_turn"
            return new.session_id

    sid = asyncio.run(go())
    offered = rec.of(AvailableCommandsUpdate)
    assert [c.name for c in offered[0].available_commands] == ["undo", "redo", "compact"]
    said = rec.message()
    assert "undo: restored 1 file" in said and "nothing undone" in said
    assert "redo: restored 1 file" in said and "nothing was compacted" in said
    assert a.read_text() == "A\n"
    undone = [e for e in _events(sid) if e.type == "undo_applied"]
    assert [(e.kind, e.requested_by) for e in undone] == [("undo", "acp"), ("redo", "acp")]
    assert len(server.requests) == 2  # the commands never reached the model


def test_asks_become_permission_requests_answered_both_ways(server: ScriptedServer,
                                                           abhed_home: Path, workspace: Path) -> None:
    """What the TUI's card shows (the diff, the whole command, the parse's findings), the
    card's answers, and a failed answer that refuses; "always" stores exactly the rules named."""
    write_config(abhed_home, server.base_url, policy={"mode": "ask"}, sandbox={"backend": "bwrap"})
    a, b = workspace / "a.txt", workspace / "b.txt"
    server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(a), "content": "A\n"}},
                               {"name": "write", "arguments": {"path": str(b), "content": "B\n"}}]},
               {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one > one.txt\n"
                                                              "echo two > two.txt",
                                                              "description": "two files"}}]},
               {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one > one.txt\n"
                                                              "echo two > two.txt",
                                                              "description": "two files"}}]},
               {"tool_calls": [{"name": "write", "arguments": {"path": str(b), "content": "B\n"}}]},
               {"text": "done"})
    def answer(call: Any, options: Any) -> str | None:
        if len(rec.asked) == 4:
            raise RequestError(-32603, "the editor crashed while asking")
        if call.kind == "execute":
            return "allow_always"
        return "allow_once" if call.raw_input["path"] == str(a) else "reject"

    rec = Recorder(answer)

    async def go() -> str:
        async with connect(rec) as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            done = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                      prompt=prompt("write both")), 60)
            assert done.stop_reason == "end_turn"
            return new.session_id

    sid = asyncio.run(go())
    assert a.read_text() == "A\n" and not b.exists()
    assert (workspace / "two.txt").exists()
    # four questions: two writes, the bash command once (then its "always" rule answered), the
    # last write's question failed in the editor, which is a refusal
    assert len(rec.asked) == 4
    first, options = [q for q in rec.asked if q[0].raw_input.get("path") == str(a)][0]
    assert [o.option_id for o in options] == ["allow_once", "allow_always", "reject"]
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    diff = [c for c in first.content if isinstance(c, FileEditToolCallContent)]
    assert diff and diff[0].path == str(a) and diff[0].new_text == "A\n" and diff[0].old_text is None
    said = "\n".join(c.content.text for c in first.content if c.type == "content")
    assert "why it asks" in said and "+A" in said
    bash, bash_options = rec.asked[2]
    shown = "\n".join(c.content.text for c in bash.content if c.type == "content")
    assert "echo one > one.txt\necho two > two.txt" in shown and "(2 lines, shown whole)" in shown
    assert "policy's parse found" in shown
    always = [o for o in bash_options if o.option_id == "allow_always"][0]
    assert always.kind == "allow_always" and "tool=bash" in always.name
    events = _events(sid)
    approvals = [(e.tool, e.decision, e.decided_by) for e in events if e.type == "approval"]
    assert sorted(approvals[:2]) == [("write", "allow", "acp"), ("write", "deny", "acp")]
    assert approvals[2:] == [("bash", "allow", "acp"), ("write", "deny", "acp")]
    assert [e for e in events if e.type == "policy_rule_added"][0].added_by == "acp"
    failed = [e for e in events if e.type == "approval"][-1]
    assert "no answer" in failed.reason
    assert [e.type for e in events][-1] == "session_ended"


def test_cancel_stops_the_running_command_as_esc_does(server: ScriptedServer, abhed_home: Path,
                                                     workspace: Path) -> None:
    write_config(abhed_home, server.base_url, policy={"mode": "auto"}, sandbox={"backend": "bwrap"})
    server.add({"tool_calls": [{"name": "bash", "arguments": {
                   "command": "echo started > started.txt; sleep 300; echo finished > finished.txt",
                   "description": "wait", "timeout_ms": 600000}}]},
               {"text": "after"}, {"text": "second turn"})
    rec = Recorder()

    async def go() -> tuple[str, Any, Any]:
        async with connect(rec) as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            turn = asyncio.ensure_future(conn.prompt(session_id=new.session_id,
                                                     prompt=prompt("run it")))
            await rec.until(lambda: (workspace / "started.txt").exists())
            await conn.cancel(session_id=new.session_id)
            done = await asyncio.wait_for(turn, 60)
            again = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                       prompt=prompt("go on")), 60)
            return new.session_id, done, again

    sid, done, again = asyncio.run(go())
    assert done.stop_reason == "cancelled" and again.stop_reason == "end_turn"
    assert not (workspace / "finished.txt").exists()
    bash = [us for us in rec.calls().values()][0]
    assert bash[-1].status == "failed" and "killed" in bash[-1].content[-1].content.text
    ends = [e for e in _events(sid) if e.type == "run_ended"]
    assert [e.reason for e in ends] == ["interrupted", "done"]
    assert "acp session/cancel" in ends[0].message


def test_load_replays_an_earlier_session_and_list_shows_it(server: ScriptedServer, abhed_home: Path,
                                                          workspace: Path, tmp_path: Path) -> None:
    write_config(abhed_home, server.base_url, policy={"mode": "auto"},
                 events={"redact": ["SECRET[0-9]+"]})
    (workspace / "a.txt").write_text("alpha SECRET1234\n")
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "a.txt")}}]},
               {"text": "It says alpha."}, {"text": "Still alpha."})
    first, second = Recorder(), Recorder()
    other = tmp_path / "other"
    other.mkdir()

    async def go() -> tuple[str, Any]:
        async with connect(first) as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                               prompt=prompt("what is in a.txt?")), 60)
        async with connect(second) as (conn, _):
            listed = await conn.list_sessions(cwd=str(workspace))
            assert [s.session_id for s in listed.sessions] == [new.session_id]
            assert listed.sessions[0].title == "what is in a.txt?"
            for bad in ({"cwd": str(other), "session_id": new.session_id},
                        {"cwd": str(workspace), "session_id": "s-nope"},
                        {"cwd": "relative/dir", "session_id": new.session_id}):
                with pytest.raises(RequestError) as refused:
                    await conn.load_session(mcp_servers=[], **bad)
                assert refused.value.code == -32602
            loaded = await conn.load_session(cwd=str(workspace), session_id=new.session_id,
                                             mcp_servers=[])
            assert loaded is not None and loaded.modes is not None
            replayed = len(second.updates)
            done = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                      prompt=prompt("and now?")), 60)
            assert done.stop_reason == "end_turn"
            return new.session_id, replayed

    sid, replayed = asyncio.run(go())
    history = second.updates[:replayed]
    assert isinstance(history[0][1], UserMessageChunk)
    assert history[0][1].content.text == "what is in a.txt?"
    starts = [u for _, u in history if isinstance(u, ToolCallStart)]
    assert starts[0].title.startswith("read ") and starts[0].status == "pending"
    assert any(isinstance(u, ToolCallProgress) and u.status == "completed" for _, u in history)
    assert second.message().startswith("It says alpha.") and second.message().endswith("Still alpha.")
    # the operator's redaction binds what the editor is shown, live and replayed
    assert "[redacted]" in str(first.updates) and "[redacted]" in str(history)
    assert "SECRET1234" not in str(first.updates) + str(second.updates)
    # the resumed run sent the whole conversation to the model
    assert "It says alpha." in str(server.requests[-1])
    runs = [e for e in _events(sid) if e.type == "run_started"]
    assert [r.resumed for r in runs] == [False, True]


def test_cancel_while_a_question_waits_refuses_it(server: ScriptedServer, abhed_home: Path,
                                                  workspace: Path) -> None:
    """Esc with the approval card open: the call is refused, nothing runs, the turn ends."""
    write_config(abhed_home, server.base_url, policy={"mode": "ask"})
    target = workspace / "a.txt"
    server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(target),
                                                               "content": "A\n"}}]},
               {"text": "never"})
    rec = Recorder()
    rec.hold = True

    async def go() -> tuple[str, Any]:
        async with connect(rec) as (conn, _):
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            turn = asyncio.ensure_future(conn.prompt(session_id=new.session_id,
                                                     prompt=prompt("write it")))
            await rec.until(lambda: rec.asked)
            await conn.cancel(session_id=new.session_id)
            return new.session_id, await asyncio.wait_for(turn, 60)

    sid, done = asyncio.run(go())
    assert done.stop_reason == "cancelled" and not target.exists()
    events = _events(sid)
    approval = [e for e in events if e.type == "approval"][0]
    assert approval.decision == "deny" and "cancelled" in approval.reason
    assert [e.reason for e in events if e.type == "run_ended"] == ["interrupted"]
