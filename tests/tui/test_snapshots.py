"""SVG snapshots of the app, at a pinned terminal size, animation off, cursor steady.

The app runs on a FakeLink (no agent, no threads); each test feeds the app's
sink the events and deltas a real run produces, so the picture is exact and
repeatable.  Regenerate after a deliberate change with::

    .venv/bin/python -m pytest tests/tui/test_snapshots.py --snapshot-update

docs/tui.md shows these files (tests/tui/__snapshots__/test_snapshots/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from appliance.events import PlanStepState, PlanUpdated, TodoEntry, TodoUpdated
from tests.tui.helpers import INFO, SID, fake_app, feed_turn, pending, stored, stream
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


def test_idle(snap_compare: Any) -> None:
    app, before = prepared(lambda a: feed_turn(
        a, "what does util.py export?", tool="read", args={"path": "/work/demo/src/util.py"},
        output="     1\tdef slug(text: str) -> str:\n     2\t    return text.lower()\n",
        answer="`src/util.py` exports one function, **`slug`**, which lower-cases its input."))
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_streaming_frozen_mid_stream(snap_compare: Any) -> None:
    def feed(a: AbhedApp) -> None:
        feed_turn(a, "write a fizzbuzz in python")
        a.running = True
        stream(a, "Here is a **FizzBuzz**:\n\n```python\nfor i in range(1, 101):\n"
                  "    if i % 15 == 0:\n        print('FizzBuzz')\n    elif i % 3")
    app, before = prepared(feed)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_tool_card_expanded(snap_compare: Any) -> None:
    out = "".join(f"test_case_{i:02d} PASSED\n" for i in range(30))
    app, before = prepared(lambda a: feed_turn(
        a, "run the tests", tool="bash", args={"command": "pytest -q", "description": "tests"},
        output=out, answer="All 30 tests pass."))
    assert snap_compare(app, terminal_size=SIZE, run_before=before, press=["ctrl+o"])


def test_diff_of_an_edit(snap_compare: Any) -> None:
    app, before = prepared(lambda a: feed_turn(
        a, "make slug strip spaces", tool="edit",
        args={"path": "/work/demo/src/util.py",
              "old_string": "def slug(text: str) -> str:\n    return text.lower()",
              "new_string": "def slug(text: str) -> str:\n    return text.strip().lower()"},
        output="Edited /work/demo/src/util.py: 1 replacement at line 1.",
        answer="Done: `slug` now strips spaces first."))
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_approval_card_for_a_destructive_command(snap_compare: Any) -> None:
    def feed(a: AbhedApp) -> None:
        feed_turn(a, "clean the build output")
        a.running = True
        a.sink.approval(pending("bash", {"command": "rm -rf build dist", "description":
                                         "remove build outputs"},
                                "destructive: rm -rf (recursive forced delete) (always asks, in "
                                "every mode)", commands=("rm -rf build dist",)))
    app, before = prepared(feed)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


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
    app, before = prepared(feed)
    assert snap_compare(app, terminal_size=(120, 32), run_before=before)


def test_narrow_terminal(snap_compare: Any) -> None:
    app, before = prepared(lambda a: feed_turn(
        a, "list the python files", tool="glob", args={"pattern": "**/*.py"},
        output="/work/demo/src/app.py\n/work/demo/src/util.py\n/work/demo/tests/test_util.py\n",
        answer="Three: `src/app.py`, `src/util.py` and `tests/test_util.py`."))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_error_screen(snap_compare: Any) -> None:
    app, before = prepared(config=None, problem=(
        "no model provider is configured: add one to \"custom_providers\" in config.json "
        "(see docs/providers.md), e.g. a local `abhed serve`"))
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_hostile_output_is_shown_as_text(snap_compare: Any) -> None:
    app, before = prepared(lambda a: feed_turn(
        a, "cat the file", tool="bash", args={"command": "cat notes.txt", "description": "show"},
        output="before\x1b]52;c;UFdORUQ=\x07after \x1b[2J\x1b[31mred\x1b[0m \r\x00end",
        answer="It holds escape sequences: \x1b]0;title\x07 and \x9b31m."))
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


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
    app, before = prepared(feed)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)
