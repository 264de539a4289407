"""The app against the real appliance (scripted model server, host sandbox), driven by Pilot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual import events

from models.scripted import ScriptedServer
from tests.tui.helpers import asked, kind_of, notes, real_app, send, until, write_config
from tui._entries import ToolEntry

pytestmark = pytest.mark.anyio

SIZE = (100, 32)


@pytest.fixture
def server(abhed_home: Path) -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        write_config(abhed_home, s.base_url)
        yield s


def kinds(app: object) -> list[str]:
    return [kind_of(e) for e in app.transcript.entries]  # type: ignore[attr-defined]


async def test_prompt_tool_call_and_streamed_answer(server: ScriptedServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "a.txt")}}]},
               {"text": "It says **alpha**.\n\n```python\nprint('x')\n```\n", "chunk_chars": 3})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.info is not None, what="the agent to start")
        assert app.info is not None and app.info.model == "scripted" and app.info.sandbox == "host"
        app.composer.text = "what is in a.txt?"
        await pilot.press("enter")
        await until(pilot, lambda: app.view.last_answer and not app.running, what="the run to end")
        assert kinds(app)[-3:] == ["user", "tool", "assistant"]
        card = app.transcript.entries[-2]
        assert isinstance(card, ToolEntry) and card.status == "ok"
        assert "alpha" in card.output
        status = str(app.query_one("#status").render())
        assert "UNSANDBOXED" in status and "scripted" in status and "idle" in status


async def test_no_provider_opens_on_an_error_screen_not_a_traceback(abhed_home: Path,
                                                                    workspace: Path) -> None:
    (abhed_home / "config.json").write_text("{}")
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state == "not started", what="the error screen")
        text = app.transcript.entries[-1].text()
        assert "Abhed could not start" in text and "no model provider is configured" in text
        app.composer.text = "hello"
        await pilot.press("enter")  # refused with a sentence, the app stays up
        assert "not running" in app.transcript.entries[-1].text()
        assert app.composer.text == "hello"  # kept, to send once it is fixed
        assert app.is_running


async def test_server_down_is_said_in_words(abhed_home: Path, workspace: Path) -> None:
    write_config(abhed_home, "http://127.0.0.1:9/v1")
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state == "not started", what="the error screen")
        text = app.transcript.entries[-1].text()
        assert "Traceback" not in text and "127.0.0.1:9" in text


async def test_destructive_bash_card_offers_no_always_and_deny_reason_reaches_model(
        server: ScriptedServer, workspace: Path) -> None:
    server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build",
                                                              "description": "clean"}}]},
               {"text": "ok, I will not"})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        card = await asked(pilot, app, "clean up")
        assert card.pending.always_rules == ()
        assert "rm -rf build" in card.pending.commands
        await pilot.press("shift+tab")  # to the card: only then do its keys answer
        await pilot.press("a")  # no "always" for a destructive command: ignored
        assert not card.pending.answered
        await pilot.press("pageup")  # the transcript still scrolls while the card is open
        assert app.card is card
        await pilot.press("r")
        for ch in "use make clean":
            await pilot.press("space" if ch == " " else ch)
        await pilot.press("enter")
        await until(pilot, lambda: not app.running and app.view.last_answer, what="the run to end")
        tool_msgs = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
        assert "use make clean" in tool_msgs[-1]["content"]
        assert app.card is None


async def test_allow_always_stores_the_rule_it_showed(abhed_home: Path, workspace: Path) -> None:
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url, policy={"mode": "ask"})
        target = workspace / "notes.txt"
        server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(target),
                                                                   "content": "hi\n"}}]},
                   {"text": "written"})
        app = real_app(workspace)
        async with app.run_test(size=SIZE) as pilot:
            card = await asked(pilot, app, "write notes")
            assert card.pending.always_rules, "a write in ask mode can be allowed always"
            shown = card.pending.always_rules[0]
            await pilot.press("shift+tab", "a")
            await until(pilot, lambda: not app.running and app.view.last_answer)
            assert target.read_text() == "hi\n"
            assert any("stored for this session" in n for n in notes(app))
            assert "tool=write" in shown


async def test_type_ahead_guard_ignores_keys_until_armed(server: ScriptedServer, workspace: Path) -> None:
    server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf x", "description": "rm"}}]},
               {"text": "done"})
    now = [100.0]
    app = real_app(workspace, guard_s=0.5, clock=lambda: now[0])
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "go")
        card = await until(pilot, lambda: app.card)
        await pilot.press("shift+tab", "y")  # typed as the card got the keys: must not answer it
        assert not card.pending.answered
        now[0] += 0.6
        await pilot.press("y")
        await until(pilot, lambda: card.pending.answered)
        await until(pilot, lambda: not app.running)


async def test_esc_interrupts_a_running_command_and_never_quits(server: ScriptedServer,
                                                                 workspace: Path) -> None:
    server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30", "description": "wait"}}]},
               {"text": "never reached"})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "wait")
        await until(pilot, lambda: app.state == "running bash", what="the command to start")
        await pilot.press("escape")
        await until(pilot, lambda: not app.running, timeout_s=20, what="the interrupt")
        await pilot.press("escape")  # idle: nothing to interrupt, and it does not quit
        assert app.is_running
        assert "interrupted" in " ".join(notes(app))


async def test_enter_steers_and_tab_queues_while_working(server: ScriptedServer, workspace: Path) -> None:
    server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 1", "description": "wait"}}]},
               {"text": "first done"}, {"text": "second done"})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "start")
        await until(pilot, lambda: app.state == "running bash")
        app.composer.text = "also check the docs"
        await pilot.press("enter")
        app.composer.text = "then write a summary"
        await pilot.press("tab")
        assert app.queue == ["then write a summary"]
        assert "1 queued" in str(app.query_one("#status").render())
        await until(pilot, lambda: len(server.requests) >= 3 and not app.running, timeout_s=30,
                    what="the queued message to run after the turn")
        second = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"]
        assert second[-1] == "also check the docs"
        third = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "user"]
        assert third[-1] == "then write a summary"
        assert app.queue == []


async def test_ctrl_c_clears_then_needs_two_presses_to_quit(server: ScriptedServer,
                                                           workspace: Path) -> None:
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.info is not None)
        app.composer.text = "draft"
        await pilot.press("ctrl+c")
        assert app.composer.text == "" and app.is_running
        await pilot.press("ctrl+c")
        assert app.is_running
        await pilot.press("ctrl+c")
    assert app.return_code == 0


async def test_ctrl_d_quits(server: ScriptedServer, workspace: Path) -> None:
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+d")
    assert not app.is_running


async def test_slash_commands_and_completion(server: ScriptedServer, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("x")
    (workspace / ".gitignore").write_text("ignored.py\n")
    (workspace / "ignored.py").write_text("x")
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.info is not None)
        app.composer.text = "/he"
        await pilot.press("tab")
        assert app.composer.text == "/help "
        await pilot.press("enter")
        assert "Ctrl+D" in app.transcript.entries[-1].text()
        app.composer.text = "/compact"
        await pilot.press("enter")
        await until(pilot, lambda: "nothing to compact" in app.transcript.entries[-1].text())
        app.composer.text = "/undo"
        await pilot.press("enter")
        assert "nothing undone" in app.transcript.entries[-1].text()
        app.composer.text = "/sandbox"
        await pilot.press("enter")
        assert "UNSANDBOXED" in app.transcript.entries[-1].text()
        app.composer.text = "/nope"
        await pilot.press("enter")
        assert "no command" in app.transcript.entries[-1].text()
        app.composer.text = "look at @mai"
        await pilot.press("tab")
        assert app.composer.text == "look at @src/main.py"
        assert app.link is not None and app.link.complete_paths("ign") == []  # .gitignore applies
        app.composer.text = "/export out.md"
        await pilot.press("enter")
        assert (workspace / "out.md").read_text().startswith("# Abhed session")
        sid = app.info.session_id if app.info else ""
        app.composer.text = "/mode plan"
        await pilot.press("enter")
        await until(pilot, lambda: app.info is not None and app.info.mode == "plan")
        assert app.info is not None and app.info.session_id == sid  # same session, new mode
        app.composer.text = "/new"
        await pilot.press("enter")
        await until(pilot, lambda: app.info is not None and app.info.session_id != sid)


async def test_resume_rerenders_the_session_from_its_log(server: ScriptedServer, workspace: Path) -> None:
    server.add({"text": "first answer"})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "remember me")
        sid = app.info.session_id if app.info else ""
        await until(pilot, lambda: app.view.last_answer and not app.running)
    again = real_app(workspace, session_id=sid)
    async with again.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: again.info is not None)
        assert ["user", "assistant"] == kinds(again)[:2]
        assert again.transcript.entries[0].text() == "remember me"
    picker = real_app(workspace)  # a new session, then /resume picks the old one from a list
    async with picker.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: picker.info is not None)
        assert picker.info is not None and picker.info.session_id != sid
        picker.composer.text = "/resume"
        await pilot.press("enter")
        await until(pilot, lambda: type(picker.screen).__name__ == "SessionPicker")
        await pilot.press("down", "enter")  # newest first: the second row is the old session
        await until(pilot, lambda: picker.info is not None and picker.info.session_id == sid)
        assert any(e.text() == "remember me" for e in picker.transcript.entries)


async def test_paste_of_10000_lines_arrives_whole_and_oversize_is_refused_aloud(
        server: ScriptedServer, workspace: Path) -> None:
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.info is not None)
        text = "\n".join(f"line {i}" for i in range(10_000))
        app.post_message(events.Paste(text))
        await until(pilot, lambda: app.composer.text.count("\n") == 9_999, what="the paste")
        app.composer.text = ""
        app.post_message(events.Paste("x" * 1_000_001))
        await until(pilot, lambda: "paste refused" in app.transcript.entries[-1].text())
        assert app.composer.text == ""


async def test_small_terminal_resize_and_no_color(server: ScriptedServer, workspace: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    server.add({"text": "short"})
    app = real_app(workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.no_color
        await send(pilot, app, "hi")
        await pilot.resize_terminal(40, 12)
        await pilot.resize_terminal(160, 50)
        await until(pilot, lambda: app.view.last_answer == "short" and not app.running)
        await pilot.resize_terminal(80, 24)
        assert app.query_one("#status").region.y == 23
        # one message each, after resizes: nothing duplicated or lost
        assert kinds(app).count("user") == 1 and kinds(app).count("assistant") == 1


async def test_tool_card_expands_by_key(server: ScriptedServer, workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"row {i}\n" for i in range(50)))
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "long.txt")}}]},
               {"text": "read it"})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "read")
        await until(pilot, lambda: not app.running and app.view.last_answer)
        card = next(e for e in app.transcript.entries if isinstance(e, ToolEntry))
        t = app.transcript
        collapsed = t.total_lines
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert card.expanded and t.total_lines > collapsed + 20
        await pilot.press("shift+tab")  # to the conversation's cards: the last one is picked
        assert t.has_focus and t.selected is card
        await pilot.press("enter")  # Enter goes back to the message box; it never toggles
        assert card.expanded and app.composer.has_focus
        await pilot.press("shift+tab", "o")
        assert not card.expanded


async def test_hostile_text_never_reaches_the_terminal_raw() -> None:
    from tests.tui.helpers import INFO, fake_app, feed_turn

    app = fake_app()
    async with app.run_test(size=SIZE) as pilot:
        app.sink.started(INFO)
        feed_turn(app, "cat it \x1b[2J", tool="bash", args={"command": "cat f\x1b]0;t\x07"},
                  output="a\x1b]52;c;UFdORUQ=\x07b" + "\xff\ud800" + "y" * 1_000_000, answer="\x1b]52;c;eA==\x07 ok \x9b")
        await pilot.pause()
        await pilot.pause()
        svg = app.export_screenshot()
        assert "\x1b" not in svg and "\x07" not in svg and "\x9b" not in svg
        assert "␛]52;c;UFdORUQ=␇" in svg.replace("&#160;", " ") or "]52;c;UFdORUQ=" in svg
        card = next(e for e in app.transcript.entries if isinstance(e, ToolEntry))
        t = app.transcript
        assert t._heights[card.index] < 12  # a 1 MB line is one row


def test_the_tuis_mode_list_is_the_policys() -> None:
    # One ordered type (foundation.MODES): the TUI, `abhed tui --mode` and policy name the
    # same tuple, in the same order, strictest first.
    import click

    from appliance.policy import MODES
    from cli.tui import tui as tui_verb
    from tui._link import MODES as TUI_MODES

    choice = next(p.type for p in tui_verb.params if p.name == "mode")
    assert isinstance(choice, click.Choice)
    assert TUI_MODES is MODES
    assert tuple(choice.choices) == MODES == ("plan", "ask", "auto")


async def test_a_real_command_streams_into_its_card_before_it_ends(server: ScriptedServer,
                                                                   workspace: Path) -> None:
    server.add({"tool_calls": [{"name": "bash", "arguments": {
        "command": "echo starting; sleep 3; echo finished; exit 3", "description": "slow"}}]},
        {"text": "it failed"})
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "run it")
        card = await until(pilot, lambda: next((c for c in app.view.cards.values()
                                                 if c.tool == "bash"), None))
        await until(pilot, lambda: "starting" in card.live, timeout_s=10,
                    what="the output while the command runs")
        assert card.status == "running" and "finished" not in card.live
        await until(pilot, lambda: not app.running, timeout_s=30)
        assert card.status == "failed" and card.outcome is not None
        assert card.outcome.label == "failed (exit 3)" and "finished" in card.outcome.tail


async def test_undo_again_walks_back_and_says_when_nothing_is_left_and_redo_puts_it_back(
        abhed_home: Path, workspace: Path) -> None:
    a, b = workspace / "a.txt", workspace / "b.txt"
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url)
        server.add({"tool_calls": [{"name": "write", "arguments": {"path": str(a), "content": "A\n"}}]},
                   {"text": "wrote a"},
                   {"tool_calls": [{"name": "write", "arguments": {"path": str(b), "content": "B\n"}}]},
                   {"text": "wrote b"})
        app = real_app(workspace)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.info is not None)
            for prompt in ("write a", "write b"):
                app.composer.text = prompt
                await pilot.press("enter")
                answer = prompt.replace("write", "wrote")
                await until(pilot, lambda answer=answer: not app.running  # type: ignore[misc]
                            and app.view.last_answer == answer)
            for _ in range(3):
                app.composer.text = "/undo"
                await pilot.press("enter")
                await pilot.pause()
            said = notes(app)[-3:]
            assert said[0].startswith("undo: restored 1 file") and not b.exists() and not a.exists()
            assert said[1].startswith("undo: restored 1 file")
            assert "nothing undone" in said[2] and "undone already" in said[2]
            app.composer.text = "/redo"
            await pilot.press("enter")
            await pilot.pause()
            assert notes(app)[-1].startswith("redo: restored 1 file") and a.read_text() == "A\n"


async def test_an_edit_is_approved_looking_at_its_real_lines(abhed_home: Path, workspace: Path) -> None:
    target = workspace / "long.py"
    target.write_text("".join(f"x{i} = {i}\n" for i in range(1, 101)))
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url, policy={"mode": "ask"})
        server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(target)}}]},
                   {"tool_calls": [{"name": "edit", "arguments": {
                       "path": str(target), "old_string": "x70 = 70\n", "new_string": "x70 = 7\n"}}]},
                   {"text": "edited"})
        app = real_app(workspace)
        async with app.run_test(size=SIZE) as pilot:
            card = await asked(pilot, app, "fix x70")
            shown = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "-@@" not in shown and "   70       - x70 = 70" in shown
            assert "         70 + x70 = 7" in shown and "   67    67   x67 = 67" in shown
            assert card.pending.preview and target.read_text().count("x70 = 70") == 1
            await pilot.press("shift+tab")
            await pilot.pause(0.6)
            await pilot.press("y")
            await until(pilot, lambda: not app.running)
            assert "x70 = 7\n" in target.read_text()


async def _a_session_in(workspace: Path) -> str:
    """Open the app in a new folder ``workspace`` until its session has started: its id."""
    workspace.mkdir()
    there = real_app(workspace)
    async with there.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: there.info is not None)
        return there.info.session_id if there.info else ""


async def test_resume_lists_only_this_workspace_and_never_starts_another_workspaces_session(
        server: ScriptedServer, workspace: Path, tmp_path: Path) -> None:
    """Issue 33: /resume listed every workspace's sessions; picking another's failed to start,
    Ctrl+R failed again, and nothing said that /new recovers."""
    other = (tmp_path / "other").resolve()
    foreign = await _a_session_in(other)
    here = real_app(workspace)
    async with here.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: here.info is not None)
        mine = here.info.session_id if here.info else ""
        here.composer.text = "/resume"
        await pilot.press("enter")
        await until(pilot, lambda: type(here.screen).__name__ == "SessionPicker")
        picker = here.screen
        assert [s["id"] for s in picker.sessions] == [mine]  # type: ignore[attr-defined]
        assert picker.others == 1  # type: ignore[attr-defined]
        await pilot.press("escape")
        await until(pilot, lambda: type(here.screen).__name__ != "SessionPicker")
        here.composer.text = f"/resume {foreign}"
        await pilot.press("enter")
        await until(pilot, lambda: foreign in notes(here)[-1])
        assert f"abhed tui -w {other} --session {foreign}" in notes(here)[-1]
        assert here.info is not None and here.info.session_id == mine  # still open, untouched
        here.composer.text = "/resume s-no-such-session"
        await pilot.press("enter")
        await until(pilot, lambda: "no session 's-no-such-session'" in notes(here)[-1])
        assert here.info is not None and here.info.session_id == mine


async def test_a_session_that_cannot_start_here_says_new_recovers(
        server: ScriptedServer, workspace: Path, tmp_path: Path) -> None:
    other = (tmp_path / "other").resolve()
    foreign = await _a_session_in(other)
    app = real_app(workspace, session_id=foreign)  # abhed tui --session FOREIGN, here
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state == "not started", what="the error screen")
        text = app.transcript.entries[-1].text()
        assert "belongs to workspace" in text and "/new starts a new session here" in text
        await pilot.press("ctrl+r")  # the same session again: the same answer, the way out said
        await until(pilot, lambda: app.state == "not started"
                    and "/new starts" in app.transcript.entries[-1].text())
        app.composer.text = "/new"
        await pilot.press("enter")
        await until(pilot, lambda: app.info is not None, what="a new session")
        assert app.info is not None and app.info.session_id != foreign


async def test_doctor_shows_what_abhed_doctor_shows(server: ScriptedServer, workspace: Path) -> None:
    from appliance.doctor import examine

    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "/doctor")
        report = await until(pilot, lambda: next((n for n in notes(app) if "\ndoctor: " in n), ""),
                             what="the doctor's report")
        expected = examine()  # the same function `abhed doctor` prints
        assert report.splitlines()[-1] == expected.lines()[-1]
        assert [line.split()[1] for line in report.splitlines()[:-1] if line[:1] != " "] == \
            [line.split()[1] for line in expected.lines()[:-1] if line[:1] != " "]


async def test_a_demonstration_model_is_said_once_per_tui_session(abhed_home: Path,
                                                                  workspace: Path) -> None:
    """Issue 33: the demo's SmolLM2 answered without reading the file, and nothing told a
    newcomer what it can do. Its catalog entry's probe bar (a named tool choice) says so."""
    import json

    with ScriptedServer() as s:
        write_config(abhed_home, s.base_url)
        conf = json.loads((abhed_home / "config.json").read_text())
        conf["custom_providers"][0]["catalog_entry"] = "tiny-demo"
        (abhed_home / "config.json").write_text(json.dumps(conf))
        (abhed_home / "catalog.json").write_text(json.dumps({"models": [{
            "name": "tiny-demo", "served_name": "scripted", "weights_dir": str(abhed_home),
            "probe": {"families": ["wire"], "quick_families": ["wire"], "min_rate": {},
                      "tool_choice": "named"}}]}))
        app = real_app(workspace)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.info is not None, what="the agent to start")
            said = [n for n in notes(app) if "tiny demonstration model" in n]
            assert len(said) == 1 and said[0].startswith("scripted is a tiny demonstration")
            app.composer.text = "/new"
            await pilot.press("enter")
            await until(pilot, lambda: app.info is not None and "Session" in notes(app)[-1])
            assert not [n for n in notes(app) if "tiny demonstration model" in n]  # said once
        (abhed_home / "catalog.json").write_text(json.dumps({"models": [{
            "name": "tiny-demo", "served_name": "scripted", "weights_dir": str(abhed_home)}]}))
        app = real_app(workspace)  # a model that chooses its tools: nothing to say
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.info is not None, what="the agent to start")
            assert app.info is not None and app.info.model_note == ""


async def test_a_local_model_service_started_on_demand_is_said_with_its_log(
        abhed_home: Path, workspace: Path, tmp_path: Path) -> None:
    # The demo's kind of provider: started on demand.  This checkout's Python has no vLLM, so
    # the real keeper (`abhed serve`) exits; the wait is said first, then the failure, both
    # naming the log.
    import json

    from tests.helpers import write_tiny_catalog

    write_tiny_catalog(abhed_home, tmp_path / "weights", "tiny-s")
    (abhed_home / "config.json").write_text(json.dumps({
        "sandbox": {"backend": "bwrap"},
        "custom_providers": [{"name": "local", "api": "openai", "base_url": "http://localhost/v1",
                              "catalog_entry": "tiny", "start_on_demand": True}]}))
    app = real_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state == "not started", timeout_s=120.0,
                    what="the keeper to exit and the error screen")
        said = [n for n in notes(app) if "the local model service" in n]
        assert said and said[0].startswith("starting the local model service for tiny"), notes(app)
        assert "log: " in said[0] and str(abhed_home) in said[0]
        assert "Full log" in app.transcript.entries[-1].text()
