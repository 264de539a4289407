"""The TUI's pure parts: the stream splitter, safe text, copy, the key table."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from models import Delta
from tui._commands import COMMANDS, KEYS, complete_command, help_text
from tui._copy import copy_text, osc52
from tui._safe import clip_lines, visible
from tui._stream import CODE_CHUNK_LINES, MAX_PENDING_OUTPUT, BlockSplitter, DeltaBuffer

DOC = Path(__file__).resolve().parents[2] / "docs" / "tui.md"


def split_all(text: str, piece: int) -> list[tuple[str, str]]:
    s = BlockSplitter()
    out = []
    for i in range(0, len(text), piece):
        s.feed(text[i:i + piece])
        out += s.take()
    out += s.finish()
    return [(b.kind, b.text) for b in out]


def test_paragraphs_and_fences_become_frozen_blocks() -> None:
    text = "# Title\n\nSome *text*.\n\n```python\nx = 1\ny = 2\n```\nafter\n"
    assert split_all(text, 3) == [("markdown", "# Title"), ("markdown", "Some *text*."),
                                  ("code", "x = 1\ny = 2"), ("markdown", "after")]


def test_a_2000_line_fence_is_cut_into_chunks_and_the_tail_stays_small() -> None:
    s = BlockSplitter()
    s.feed("```rust\n")
    biggest_tail = 0
    for i in range(2000):
        s.feed(f"let v{i} = {i};\n")
        tail = s.tail
        biggest_tail = max(biggest_tail, len(tail.text.splitlines()) if tail else 0)
    s.feed("```\n")
    blocks = s.take() + s.finish()
    assert biggest_tail <= CODE_CHUNK_LINES
    assert all(b.kind == "code" and b.lang == "rust" for b in blocks)
    assert sum(len(b.text.splitlines()) for b in blocks) == 2000


@given(st.text(alphabet="ab `~#\n-*", max_size=300), st.integers(1, 17))
def test_splitting_never_loses_a_line(text: str, piece: int) -> None:
    """Every non-blank, non-fence line of the reply is in exactly one block, in order."""
    got = "\n".join(t for _, t in split_all(text, piece))
    kept = [ln for ln in got.split("\n") if ln.strip()]
    fence = re.compile(r"^ {0,3}(`{3,}|~{3,})")
    source = [ln for ln in text.split("\n") if ln.strip()]
    assert [ln for ln in source if not fence.match(ln)] == \
        [ln for ln in kept if not fence.match(ln)]


def test_delta_buffer_drains_text_and_the_call_being_written() -> None:
    b = DeltaBuffer()
    b.put(Delta(kind="text", text="a"))
    b.put(Delta(kind="text", text="b"))
    b.put(Delta(kind="tool_call", name="bash"))
    assert b.drain() == ("ab", "bash", [])
    assert b.drain() == ("", None, [])


def test_control_sequences_become_visible_symbols() -> None:
    hostile = "ok\x1b]52;c;SGVsbG8=\x07 \x1b[2J\rX\x00\x9b\x7f\ud800"
    shown = visible(hostile)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown)
    assert "␛]52;c;SGVsbG8=␇" in shown and "␛[2J" in shown and "\ufffd" in shown
    assert visible("plain text\n\tindented") == "plain text\n    indented"


def test_clip_lines_bounds_a_megabyte_line_and_counts_what_it_left() -> None:
    shown, left, cut = clip_lines("x" * 1_000_000, max_lines=4, max_width=100)
    assert len(shown) < 200 and cut == 1 and left == 0 and "+999,900 chars" in shown
    shown, left, cut = clip_lines("".join(f"{i}\n" for i in range(10)), max_lines=3)
    assert shown == "0\n1\n2" and left == 7 and cut == 0
    assert clip_lines("", max_lines=3) == ("", 0, 0)


def test_osc52_wraps_for_tmux_and_refuses_oversize() -> None:
    assert osc52("hi", tmux=False) == "\x1b]52;c;aGk=\x07"
    wrapped = osc52("hi", tmux=True)
    assert wrapped is not None and wrapped.startswith("\x1bPtmux;\x1b\x1b]52;") and wrapped.endswith("\x1b\\")
    assert osc52("x" * 100_000, tmux=False) is None


def test_copy_never_claims_a_copy_that_did_not_happen() -> None:
    written: list[str] = []
    said = copy_text("hi", written.append, env={"PATH": "/nonexistent"})
    assert written and "OSC 52" in said and "depends on the terminal" in said
    assert not said.startswith("copied")
    said = copy_text("x" * 100_000, written.append, env={"PATH": "/nonexistent"})
    assert said.startswith("not copied")


def test_command_completion() -> None:
    assert complete_command("/he") == ["/help"]
    assert complete_command("/") == list(COMMANDS)
    assert complete_command("/mode plan") == []
    assert "Ctrl+D" in help_text()


def test_docs_key_table_is_the_apps() -> None:
    doc = DOC.read_text()
    for key, what in KEYS:
        assert f"| {key} | {what} |" in doc, key
    for cmd in COMMANDS:
        assert f"`{cmd}" in doc, cmd


def test_deltas_wait_for_the_events_posted_before_them() -> None:
    """A loaded UI must not draw turn 2's text before turn 1's tool card (regression)."""
    b = DeltaBuffer()
    b.put(Delta(kind="text", text="turn one "))
    b.event_posted()  # model_turn 1
    b.event_posted()  # action
    b.put(Delta(kind="text", text="turn two"))
    b.put_output("c1", "out")  # the command's output waits for its card, like the text
    assert b.drain(0) == ("turn one ", None, [])
    assert b.drain(1) == ("", None, [])  # the action is not handled yet: turn two waits
    assert b.drain(2) == ("turn two", None, [("c1", "out")])


def test_a_flood_of_command_output_waits_bounded() -> None:
    b = DeltaBuffer()
    for _ in range(1000):
        b.put_output("c1", "x" * 1000 + "\n")
    b.put_output("c1", "the end")
    (_, _, outs) = b.drain()
    text = "".join(t for _, t in outs)
    assert len(text) <= MAX_PENDING_OUTPUT and text.endswith("the end")


def _diff_rows(diff: str) -> list[str]:
    from rich.console import Console

    from tui._render import unified_diff

    console = Console(width=100, color_system=None)
    with console.capture() as cap:
        console.print(unified_diff(diff))
    return [line.rstrip() for line in cap.get().splitlines() if line.strip()]


def test_a_new_files_diff_shows_its_lines_and_no_phantom_line_after_the_last() -> None:
    import difflib

    diff = "".join(difflib.unified_diff([], ["hello\n", "world\n"], "/dev/null", "/w/notes.txt"))
    rows = [" ".join(r.split()) for r in _diff_rows(diff)]
    # Found in tmux: the split after the diff's last newline drew as a third line "0  3".
    assert rows == ["/w/notes.txt", "1 + hello", "2 + world"], rows


def test_no_newline_at_end_of_file_is_a_note_not_a_numbered_line() -> None:
    diff = ("--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
            "\\ No newline at end of file\n")
    rows = [" ".join(r.split()) for r in _diff_rows(diff)]
    assert rows == ["b", "1 1 a", "2 - b", "\\ No newline at end of file", "2 + c",
                    "\\ No newline at end of file"], rows


def test_a_frozen_code_piece_is_drawn_plain_then_highlighted_once_polished() -> None:
    """Issue 33 (typing echo): highlighting a frozen 40-line piece was the render clock's
    costliest step; it is drawn plain while it streams and highlighted a piece per beat."""
    from rich.console import Console
    from rich.style import Style

    from tui._entries import AssistantEntry, Look

    console = Console(width=100, color_system="truecolor")
    look = Look(*[Style() for _ in range(7)])
    entry = AssistantEntry(finished=False)
    entry.feed("```python\n" + "".join(f"x_{i} = {i}\n" for i in range(60)))
    entry.tick()
    n = entry.height(console, 100, look)

    def styled() -> bool:  # any colour on the first piece's lines: it was highlighted
        return any(seg.style is not None and seg.style.color is not None
                   for y in range(2, 30) for seg in entry.line(console, 100, look, y))

    assert len(entry.blocks) == 1 and not styled()  # frozen, drawn plain
    assert entry.polish() and entry.height(console, 100, look) == n and styled()
    assert not entry.polish()  # nothing left to polish
    entry.feed("".join(f"y_{i} = {i}\n" for i in range(40)) + "```\n")
    entry.tick()
    entry.height(console, 100, look)
    entry.finish()  # a finished reply is highlighted whole, polished or not
    assert all(entry._heights) and not entry._plain
