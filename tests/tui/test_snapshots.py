"""SVG snapshots of the app, at a pinned terminal size, animation off, cursor steady.

The app runs on a FakeLink (no agent, no threads); each test feeds the app's
sink the events and deltas a real run produces, so the picture is exact and
repeatable.  Regenerate after a deliberate change with::

    .venv/bin/python -m pytest tests/tui/test_snapshots.py --snapshot-update

docs/tui.md shows these files (tests/tui/__snapshots__/test_snapshots/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from textual.pilot import Pilot

from appliance.events import PlanStepState, PlanUpdated, TodoEntry, TodoUpdated
from tests.tui.helpers import INFO, SID, fake_app, feed_turn, pending, start_call, stored, stream
from tui import AbhedApp

SIZE = (100, 32)


@pytest.fixture(autouse=True)
def _steady(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield


def prepared(feed: Callable[[AbhedApp], None] | None = None, **kw: Any) -> tuple[AbhedApp, Any]:
    app = fake_app(**kw)

    async def run_before(pilot: Pilot[Any]) -> None:
        app.composer.cursor_blink = False
        if app.config is not None:
            app.sink.started(INFO)
        await pilot.pause()
        if feed is not None:
            feed(app)
        await pilot.pause()
        app._tick()
        await pilot.pause()
        app._tick()  # the render clock's next tick: what a mounted reply shows
        await pilot.pause()

    return app, run_before


def looks_right(snap_compare: Any, feed: Callable[[AbhedApp], None] | None = None, *,
                size: tuple[int, int] = SIZE, press: Sequence[str] = (), **kw: Any) -> bool:
    """The app ``feed`` fed (``kw`` made it), drawn at ``size`` after ``press``, is its
    snapshot."""
    app, before = prepared(feed, **kw)
    return bool(snap_compare(app, terminal_size=size, run_before=before, press=list(press)))


def test_idle(snap_compare: Any) -> None:
    assert looks_right(snap_compare, lambda a: feed_turn(
        a, "what does util.py export?", tool="read", args={"path": "/work/demo/src/util.py"},
        output="     1\tdef slug(text: str) -> str:\n     2\t    return text.lower()\n",
        answer="`src/util.py` exports one function, **`slug`**, which lower-cases its input."))


def test_streaming_frozen_mid_stream(snap_compare: Any) -> None:
    def feed(a: AbhedApp) -> None:
        feed_turn(a, "write a fizzbuzz in python")
        a.running = True
        stream(a, "Here is a **FizzBuzz**:\n\n```python\nfor i in range(1, 101):\n"
                  "    if i % 15 == 0:\n        print('FizzBuzz')\n    elif i % 3")
    assert looks_right(snap_compare, feed)


def test_tool_card_expanded(snap_compare: Any) -> None:
    out = "".join(f"test_case_{i:02d} PASSED\n" for i in range(30))
    assert looks_right(snap_compare, lambda a: feed_turn(
        a, "run the tests", tool="bash", args={"command": "pytest -q", "description": "tests"},
        output=out, answer="All 30 tests pass."), press=["ctrl+o"])


def test_diff_of_an_edit(snap_compare: Any) -> None:
    assert looks_right(snap_compare, lambda a: feed_turn(
        a, "make slug strip spaces", tool="edit",
        args={"path": "/work/demo/src/util.py",
              "old_string": "def slug(text: str) -> str:\n    return text.lower()",
              "new_string": "def slug(text: str) -> str:\n    return text.strip().lower()"},
        output="Edited /work/demo/src/util.py: replaced 1 occurrence (line 12).",
        details={"diff": "--- /work/demo/src/util.py\n+++ /work/demo/src/util.py\n"
                         "@@ -10,5 +10,5 @@\n \n \n def slug(text: str) -> str:\n"
                         "-    return text.lower()\n+    return text.strip().lower()\n \n"},
        answer="Done: `slug` now strips spaces first."))


def test_approval_card_for_a_destructive_command(snap_compare: Any) -> None:
    def feed(a: AbhedApp) -> None:
        feed_turn(a, "clean the build output")
        a.running = True
        a.sink.approval(pending("bash", {"command": "rm -rf build dist", "description":
                                         "remove build outputs"},
                                "destructive: rm -rf (recursive forced delete) (always asks, in "
                                "every mode)", commands=("rm -rf build dist",)))
    assert looks_right(snap_compare, feed)


def test_todo_panel(snap_compare: Any) -> None:
    def feed(a: AbhedApp) -> None:
        feed_turn(a, "add a --json flag to the CLI")
        a.sink.event(stored(TodoUpdated(session_id=SID, call_id="c1", items=[
            TodoEntry(id="1", content="read the CLI module", status="done"),
            TodoEntry(id="2", content="add the --json option", status="in_progress"),
            TodoEntry(id="3", content="test it", status="pending")])))
        a.sink.event(stored(PlanUpdated(session_id=SID, call_id="c2", title="--json flag", steps=[
            PlanStepState(step="parse the flag", status="done"),
            PlanStepState(step="print JSON lines", status="in_progress")])))
    assert looks_right(snap_compare, feed, size=(120, 32))


def test_narrow_terminal(snap_compare: Any) -> None:
    assert looks_right(snap_compare, lambda a: feed_turn(
        a, "list the python files", tool="glob", args={"pattern": "**/*.py"},
        output="/work/demo/src/app.py\n/work/demo/src/util.py\n/work/demo/tests/test_util.py\n",
        answer="Three: `src/app.py`, `src/util.py` and `tests/test_util.py`."), size=(80, 24))


def test_error_screen(snap_compare: Any) -> None:
    assert looks_right(snap_compare, config=None, problem=(
        "no model provider is configured: add one to \"custom_providers\" in config.json "
        "(see docs/providers.md), e.g. a local `abhed serve`"))


def test_hostile_output_is_shown_as_text(snap_compare: Any) -> None:
    assert looks_right(snap_compare, lambda a: feed_turn(
        a, "cat the file", tool="bash", args={"command": "cat notes.txt", "description": "show"},
        output="before\x1b]52;c;UFdORUQ=\x07after \x1b[2J\x1b[31mred\x1b[0m \r\x00end",
        answer="It holds escape sequences: \x1b]0;title\x07 and \x9b31m."))


def test_subagent_nested_in_its_task_card(snap_compare: Any) -> None:
    from appliance.events import TaskEnded, TaskStarted

    def feed(a: AbhedApp) -> None:
        feed_turn(a, "audit the parsers", tool="task",
                  args={"description": "audit the parsers", "prompt": "find unsafe parsing",
                        "agent_type": "explore"},
                  output="Found 2 places that parse untrusted input without limits.")
        a.sink.event(stored(TaskStarted(session_id=SID, call_id="r-1.1.0", child_session_id="s-child",
                                        agent_type="explore", description="audit the parsers",
                                        reserved={"turns": 8, "tokens": 20000})))
        a.sink.event(stored(TaskEnded(session_id=SID, call_id="r-1.1.0", child_session_id="s-child",
                                      status="done", spent={"turns": 3, "tokens": 5120},
                                      files_changed=[])))
    assert looks_right(snap_compare, feed)


def test_a_failing_command_says_failed_and_shows_why(snap_compare: Any) -> None:
    out = "starting\nstep 1\nstep 2\nstep 3\nstep 4\nFATAL: no database at /var/db\n[exit code 3]"
    assert looks_right(snap_compare, lambda a: feed_turn(
        a, "run the migration", tool="bash", args={"command": "./migrate.sh", "description": "m"},
        output=out, details={"exit_code": 3, "signal": None, "timed_out": False},
        ms=7574.0, wait_ms=7570.0, answer="The migration failed: there is no database."))


def test_a_running_command_streams_its_output_with_its_age(snap_compare: Any) -> None:
    now = [1000.0]

    def feed(a: AbhedApp) -> None:
        start_call(a, "start the server", "r-1.2.0", "bash",
                   {"command": "echo starting; sleep 30", "description": "wait"})
        a.sink.progress("r-1.2.0", "starting\n")  # type: ignore[attr-defined]
        a.sink.progress("r-1.2.0", "listening on :8080\n")  # type: ignore[attr-defined]
    app, before = prepared(feed, clock=lambda: now[0])

    async def run_before(pilot: Pilot[Any]) -> None:
        await before(pilot)
        now[0] += 12.4  # the card was drawn at 0 s; the clock's next second redraws its age
        app._tick()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_a_running_subagent_shows_its_calls(snap_compare: Any) -> None:
    from appliance.events import ActionEvent, ObservationEvent, TaskStarted
    from tools import ToolResult

    def feed(a: AbhedApp) -> None:
        start_call(a, "audit the parsers", "r-1.1.0", "task",
                   {"description": "audit the parsers", "prompt": "find unsafe parsing"})
        a.sink.event(stored(TaskStarted(session_id=SID, call_id="r-1.1.0",
                                        child_session_id="s-child", agent_type="explore",
                                        description="audit the parsers",
                                        reserved={"turns": 8})))
        for n, (tool, args, ok) in enumerate([("grep", {"pattern": "json.loads"}, True),
                                              ("read", {"path": "/work/demo/src/parse.py"}, None)]):
            cid = f"r-9.1.{n}"
            a.sink.event(stored(ActionEvent(session_id="s-child", call_id=cid, tool=tool,
                                            args=args)))
            if ok:
                a.sink.event(stored(ObservationEvent(
                    session_id="s-child", call_id=cid, tool=tool, duration_ms=3.0,
                    result=ToolResult(ok=True, content="3 matches"))))
    assert looks_right(snap_compare, feed)


def test_approval_of_a_heredoc_at_60x20_keeps_its_keys_on_screen(snap_compare: Any) -> None:
    command = ("cat > notes.txt <<'EOF'\n" + "".join(f"line {i} of the notes\n" for i in range(1, 16))
               + "EOF\necho 'export PATH=$HOME/bin:$PATH' >> ~/.bashrc")

    def feed(a: AbhedApp) -> None:
        feed_turn(a, "write the notes")
        a.running = True
        a.sink.approval(pending("bash", {"command": command, "description": "write notes"},
                                "mutating command in ask mode", commands=(
                                    "cat >notes.txt", "echo 'export PATH=$HOME/bin:$PATH' >>~/.bashrc"),
                                always=("tool=bash program=cat",)))
    assert looks_right(snap_compare, feed, size=(60, 20))


def test_approval_of_a_write_shows_the_diff_against_the_file(snap_compare: Any) -> None:
    preview = ("--- /work/demo/README.md\n+++ /work/demo/README.md\n@@ -40,6 +40,7 @@\n"
               " ## Install\n \n-pip install demo\n+pip install demo==2.0\n+\n+See CHANGES.md.\n"
               " \n ## Use\n")

    def feed(a: AbhedApp) -> None:
        feed_turn(a, "bump the version in the readme")
        a.running = True
        p = pending("write", {"path": "/work/demo/README.md", "content": "..."},
                    "writes need approval in ask mode", always=("tool=write path=/work/demo/**",))
        p.preview = preview
        a.sink.approval(p)
    assert looks_right(snap_compare, feed)


def test_new_output_below_while_scrolled_up(snap_compare: Any) -> None:
    def feed(a: AbhedApp) -> None:
        for i in range(12):
            feed_turn(a, f"question {i}", answer=f"answer {i}\n\nwith a second paragraph")

    async def scroll_then_more(pilot: Pilot[Any]) -> None:
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        feed_turn(pilot.app, "one more", answer="arrived while you were reading")  # type: ignore[arg-type]
        await pilot.pause()

    app, before = prepared(feed)

    async def run_before(pilot: Pilot[Any]) -> None:
        await before(pilot)
        await scroll_then_more(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_a_tiny_demonstration_model_is_said_plainly(snap_compare: Any) -> None:
    from dataclasses import replace

    from tui._notices import demo_model_note

    model = "smollm2-135m-instruct"
    info = replace(INFO, model=model, model_note=demo_model_note(model))
    app, before = prepared(config=None)  # the started message below is the demo model's

    async def run_before(pilot: Pilot[Any]) -> None:
        await before(pilot)
        app.sink.started(info)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_resume_picker_lists_this_workspace(snap_compare: Any) -> None:
    from tests.tui.helpers import FakeLink

    class Listing(FakeLink):
        def sessions(self, *, every_workspace: bool = False) -> list[dict[str, Any]]:
            mine = [{"id": SID, "workspace": "/work/demo", "created_at": "2026-01-01T00:00:00Z",
                     "last_event_at": "2026-01-01T00:10:00Z", "first_prompt": "what does util.py "
                     "export?"},
                    {"id": "s-20251231-090000-123456", "workspace": "/work/demo",
                     "created_at": "2025-12-31T09:00:00Z", "first_prompt": "fix the\nflaky test"}]
            other = [{"id": "s-20251230-080000-654321", "workspace": "/work/other",
                      "created_at": "2025-12-30T08:00:00Z", "first_prompt": "elsewhere"}]
            return mine + other if every_workspace else mine

    app, before = prepared(link_factory=Listing)

    async def run_before(pilot: Pilot[Any]) -> None:
        await before(pilot)
        app.composer.text = "/resume"
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
