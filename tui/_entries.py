"""The conversation's messages as data that draws itself: a prompt, a reply, a tool card, a notice.

An entry holds what it shows (text, a call's arguments and outcome), never
widgets; the transcript (``tui._transcript``) asks it for its height and
its lines at a width and keeps the drawn lines only for the entries near
the screen.  :meth:`Entry.drop` forgets them; they are drawn again, the
same, when scrolled back to.  So a session costs its text, and the screen
costs what is on it plus a fixed window.

A reply streams: :meth:`AssistantEntry.feed` only buffers, the app's
render clock calls :meth:`AssistantEntry.tick`, which freezes the blocks
that finished (each drawn once) and redraws only the open tail.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console, Group, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from tui._render import code, markdown, plain, unified_diff
from tui._safe import clip_lines, visible
from tui._stream import Block, BlockSplitter

if TYPE_CHECKING:
    from appliance.events import CallOutcome

__all__ = ["COLLAPSED_LINES", "EXPANDED_LINES", "AssistantEntry", "Entry", "Look", "NoticeEntry",
           "SubagentInfo", "ToolEntry", "UserEntry", "elapsed", "render_strips"]

COLLAPSED_LINES = 4
EXPANDED_LINES = 400
LIVE_KEEP_CHARS = 64 * 1024  # a running command's output kept for its card: the newest part
BAR = "▌ "


@dataclass(frozen=True)
class Look:
    """The transcript's styles (from the app's theme): bars, muted text, errors."""

    user: Style = Style(color="blue", bold=True)
    tool: Style = Style(color="magenta")
    failed: Style = Style(color="red", bold=True)
    selected: Style = Style(color="yellow", bold=True)
    muted: Style = Style(dim=True)
    error: Style = Style(color="red")
    warning: Style = Style(color="yellow")


def render_strips(console: Console, renderable: RenderableType, width: int) -> list[Strip]:
    """``renderable`` drawn at ``width`` as lines of exactly that many cells."""
    options = console.options.update_width(max(1, width)).update(height=None)
    lines = console.render_lines(renderable, options, pad=True)
    return [Strip(line, max(1, width)) for line in lines]


def _barred(strips: list[Strip], bar: Style) -> list[Strip]:
    prefix = Segment(BAR, bar)
    return [Strip([prefix, *s], s.cell_length + len(BAR)) for s in strips]


def elapsed(seconds: float) -> str:
    """``4 s``, ``1 min 05 s``: a running call's age."""
    s = int(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


class Entry:
    """One message.  Subclasses draw it; the base keeps the drawn lines for one width."""

    gap = True  # a blank line above it

    def __init__(self) -> None:
        self.version = 0  # bumped by every change that alters the drawing
        self.index = -1  # its place in the transcript, set when added
        self._cache: tuple[int, int, list[Strip]] | None = None  # (width, version, lines)

    def changed(self) -> None:
        self.version += 1

    def renderable(self, look: Look) -> RenderableType:
        raise NotImplementedError

    def bar(self, look: Look) -> Style | None:
        return None

    def text(self) -> str:
        """What the entry says, as plain text (export, selection, tests)."""
        raise NotImplementedError

    def lines(self, console: Console, width: int, look: Look) -> list[Strip]:
        cached = self._cache
        if cached is not None and cached[0] == width and cached[1] == self.version:
            return cached[2]
        bar = self.bar(look)
        inner = width - (len(BAR) if bar is not None else 0) - 1  # one column of right padding
        strips = render_strips(console, self.renderable(look), max(8, inner))
        if bar is not None:
            strips = _barred(strips, bar)
        if self.gap:
            strips = [Strip.blank(width), *strips]
        self._cache = (width, self.version, strips)
        return strips

    def height(self, console: Console, width: int, look: Look) -> int:
        return len(self.lines(console, width, look))

    def line(self, console: Console, width: int, look: Look, y: int) -> Strip:
        lines = self.lines(console, width, look)
        return lines[y] if 0 <= y < len(lines) else Strip.blank(width)

    def stamp(self, y: int) -> object:
        """What line ``y`` looks like depends on: equal stamps, equal lines (a cache key)."""
        return self.version

    def estimate(self, width: int) -> int:
        """A height guess without drawing (for entries never drawn at this width)."""
        text = self.text()
        inner = max(8, width - 4)
        rows = sum(1 + len(ln) // inner for ln in text.split("\n")[:400])
        return rows + (1 if self.gap else 0)

    @property
    def drawn(self) -> bool:
        return self._cache is not None

    def drop(self) -> None:
        """Forget the drawn lines (the entry left the window around the screen)."""
        self._cache = None


class UserEntry(Entry):
    """What the person typed (a prompt, or a steer sent mid-run)."""

    def __init__(self, text: str, kind: str = "prompt") -> None:
        super().__init__()
        self.body = text
        self.kind = kind

    def bar(self, look: Look) -> Style | None:
        return look.user

    def renderable(self, look: Look) -> RenderableType:
        label = "steer › " if self.kind == "steer" else "› "
        shown, left, _ = clip_lines(self.body, max_lines=40, max_width=2000)
        out = Text(label, style="bold") + plain(shown)
        if left:
            out.append(f"\n… {left:,} more line{'s' if left != 1 else ''} (all of it went to the "
                       "model)", style="dim")
        return out

    def text(self) -> str:
        return self.body


class NoticeEntry(Entry):
    """A line from Abhed itself: a run's end, an error, a command's answer."""

    gap = False

    def __init__(self, text: str | Text, tone: Literal["info", "error", "warning"] = "info") -> None:
        super().__init__()
        self.body = text
        self.tone = tone

    def renderable(self, look: Look) -> RenderableType:
        style = {"error": look.error, "warning": look.warning}.get(self.tone, look.muted)
        if isinstance(self.body, Text):
            return self.body
        return Text(visible(self.body), style=style)

    def text(self) -> str:
        return self.body.plain if isinstance(self.body, Text) else self.body


def _lines(n: int) -> str:
    return f"{n:,} line" + ("" if n == 1 else "s")


class AssistantEntry(Entry):
    """The model's reply: finished blocks drawn once each, one open tail redrawn per tick.

    Drawn lines are kept per block (at most :data:`KEEP_BLOCKS` blocks' worth),
    so a 2,000-line reply holds the lines of the part near the screen, not all.
    """

    KEEP_BLOCKS = 24

    def __init__(self, text: str = "", *, finished: bool = True) -> None:
        super().__init__()
        self.splitter = BlockSplitter()
        self.body = ""
        self.blocks: list[Block] = []
        self.tail: Block | None = None
        self.finished = False
        self._dirty = False
        self._width = 0
        self._heights: list[int] = []  # per block, at self._width (-1: not measured)
        self._drawn: OrderedDict[int, list[Strip]] = OrderedDict()  # block index -> its lines
        self._tail_lines: list[Strip] = []
        self._tail_stamps: list[object] = []
        self._tail_version = -1
        self._code_rows: dict[str, list[Strip]] = {}  # the open fence's lines, drawn
        self._code_rows_width = 0
        # Code pieces that froze while streaming are drawn plain first (from the open
        # piece's lines, already drawn) and highlighted once polish() lets them, when next
        # drawn: highlighting a 40-line piece was the render clock's costliest step, and
        # it waits while the person types (tui._app's keys-first clock).
        self._plain: set[int] = set()  # blocks drawn plain, not highlighted yet
        self._highlighted: set[int] = set()  # blocks polish() released for highlighting
        if text:
            self.feed(text)
        if finished:
            self.finish()
        else:
            self.tick()

    # -- streaming -------------------------------------------------------------
    def feed(self, text: str) -> None:
        if text:
            self.body += text
            self.splitter.feed(text)
            self._dirty = True

    def tick(self) -> bool:
        """Take what arrived since the last tick; True when the drawing changed."""
        if not self._dirty:
            return False
        self._dirty = False
        self.blocks.extend(self.splitter.take())
        self.tail = self.splitter.tail
        self.changed()
        return True

    def finish(self, final_text: str | None = None) -> None:
        """The reply is complete; ``final_text`` (the recorded turn) wins if the stream differed."""
        if final_text is not None and final_text != self.body:
            self.splitter = BlockSplitter()
            self.body = ""
            self.blocks = []
            self._drawn.clear()
            self._heights = []
            self.feed(final_text)
        self.blocks.extend(self.splitter.take())
        self.blocks.extend(self.splitter.finish())
        for i in self._plain:  # a finished reply is highlighted: as each piece is drawn again
            self._drawn.pop(i, None)
        self._plain.clear()
        self.tail = None
        self.finished = True
        self._dirty = False
        self.changed()

    def polish(self) -> bool:
        """Let the code pieces drawn plain be highlighted; True when there were any.

        Only their drawn lines are dropped (a highlighted piece wraps as its plain
        text does, so its height stands): a piece is highlighted when it is next
        drawn, so one far from the screen costs nothing until it is scrolled to.
        """
        if not self._plain:
            return False
        for i in self._plain:
            self._drawn.pop(i, None)
        self._highlighted |= self._plain
        self._plain.clear()
        self.changed()
        return True

    def text(self) -> str:
        return self.body

    # -- drawing ---------------------------------------------------------------
    def _block_lines(self, console: Console, width: int, i: int) -> list[Strip]:
        got = self._drawn.get(i)
        if got is not None:
            self._drawn.move_to_end(i)
            return got
        block = self.blocks[i]
        if block.kind == "code" and not self.finished and i not in self._highlighted:
            rows = self._code_rows if self._code_rows_width == width else {}
            strips = []
            for text in block.text.rstrip().split("\n"):
                strips.extend(rows.get(text) or render_strips(console, plain(text), width)
                              or [Strip.blank(width)])
            self._plain.add(i)
        else:
            strips = render_strips(console, _render_block(block), width)
        if block.kind == "markdown":
            strips = _trim_blank(strips)  # Rich pads some blocks; the gap below is the one
        # Blocks are separated by the blank line the source had between them; the pieces
        # of one long code fence follow each other directly.
        if i > 0 and not block.continues:
            strips = [Strip.blank(width), *strips]
        self._drawn[i] = strips
        self._heights[i] = len(strips)
        while len(self._drawn) > self.KEEP_BLOCKS:
            self._drawn.popitem(last=False)
        return strips

    def _layout(self, console: Console, width: int) -> list[int]:
        if width != self._width:
            self._width = width
            self._drawn.clear()
            self._heights = []
            self._tail_version = -1
        while len(self._heights) < len(self.blocks):
            self._heights.append(-1)
        for i, h in enumerate(self._heights):
            if h < 0:
                self._block_lines(console, width, i)
        if self._tail_version != self.version:
            self._tail_version = self.version
            tail = self.tail
            stamps: list[object] = []
            if tail is None:
                lines: list[Strip] = []
            elif tail.kind == "code":
                # The open piece of a fence is drawn plain, line by line (each source line
                # drawn once, so a tick draws only what is new); highlighted when it freezes.
                lines = []
                rows = self._code_rows if self._code_rows_width == width else {}
                kept: dict[str, list[Strip]] = {}
                for text in tail.text.split("\n"):
                    got = rows.get(text) or kept.get(text)
                    if got is None:
                        got = render_strips(console, plain(text), width) or [Strip.blank(width)]
                    kept[text] = got
                    lines.extend(got)
                    stamps.extend(("code", text, k) for k in range(len(got)))
                self._code_rows, self._code_rows_width = kept, width
            else:
                lines = _trim_blank(render_strips(console, markdown(tail.text), width))
            if not stamps:
                stamps = [self.version] * len(lines)
            gap = bool(self.blocks) and tail is not None and \
                not (tail.kind == "code" and tail.continues)
            self._tail_lines = [Strip.blank(width), *lines] if gap else lines
            self._tail_stamps = (["gap"] if gap else []) + stamps
        return self._heights

    def _inner(self, width: int) -> int:
        return max(8, width - 1)

    def height(self, console: Console, width: int, look: Look) -> int:
        heights = self._layout(console, self._inner(width))
        return 1 + sum(heights) + len(self._tail_lines)

    def line(self, console: Console, width: int, look: Look, y: int) -> Strip:
        inner = self._inner(width)
        heights = self._layout(console, inner)
        if y == 0:
            return Strip.blank(width)
        y -= 1
        for i, h in enumerate(heights):
            if y < h:
                return self._block_lines(console, inner, i)[y].extend_cell_length(width)
            y -= h
        if 0 <= y < len(self._tail_lines):
            return self._tail_lines[y].extend_cell_length(width)
        return Strip.blank(width)

    def stamp(self, y: int) -> object:
        """A frozen block's lines never change (at one width): only the tail's follow the
        version, so a frame that only scrolls a streaming reply redraws its tail alone."""
        if y == 0:
            return "gap"
        y -= 1
        for i, h in enumerate(self._heights):
            if h < 0:
                break
            if y < h:
                return ("block", i, i in self._plain)
            y -= h
        if 0 <= y < len(self._tail_stamps):
            return (self._width, self._tail_stamps[y])
        return self.version

    def lines(self, console: Console, width: int, look: Look) -> list[Strip]:
        n = self.height(console, width, look)
        return [self.line(console, width, look, y) for y in range(n)]

    @property
    def drawn(self) -> bool:
        return bool(self._drawn) or bool(self._tail_lines)

    def drop(self) -> None:
        self._drawn.clear()
        self._code_rows = {}
        self._tail_lines = []
        self._tail_version = -1


def _trim_blank(strips: list[Strip]) -> list[Strip]:
    start, end = 0, len(strips)
    while start < end and not strips[start].text.strip():
        start += 1
    while end > start and not strips[end - 1].text.strip():
        end -= 1
    return strips[start:end]


def _render_block(block: Block) -> RenderableType:
    return code(block.text, block.lang) if block.kind == "code" else markdown(block.text)


@dataclass
class SubagentInfo:
    """A subagent nested in its task card: who it is, its budget, what it is doing now."""

    agent_type: str = ""
    description: str = ""
    child: str = ""
    status: str = "running"
    reserved: dict[str, float] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    commands: list[Any] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    # its calls: call id -> (tool, summary, status label); the newest few are shown
    calls: OrderedDict[str, tuple[str, str, str]] = field(default_factory=OrderedDict)

    def call(self, call_id: str, tool: str, summary: str, status: str) -> None:
        old = self.calls.pop(call_id, None)
        self.calls[call_id] = (tool if old is None else old[0], summary if old is None else old[1],
                               status)
        while len(self.calls) > 50:
            self.calls.popitem(last=False)


_MARKS = {"running": ("◌", "yellow"), "ok": ("✓", "green"), "failed": ("✗", "red"),
          "refused": ("⊘", "red"), "killed": ("✗", "red"), "timed_out": ("⏱", "red")}


class ToolEntry(Entry):
    """A tool call: tool, key argument, status and why, timing; output collapsed, expandable.

    While it runs, its output arrives in :meth:`output_arrived` (the newest
    :data:`LIVE_KEEP_CHARS` kept) and the card shows its tail and its age;
    when it ends, :meth:`finished` takes the outcome judged by
    ``appliance.events.call_outcome``.
    """

    def __init__(self, call_id: str, tool: str, args: Any, *, summary: str = "",
                 clock: Any = time.monotonic) -> None:
        super().__init__()
        self.call_id = call_id
        self.tool = tool
        self.args = args
        self.summary = summary
        self.status = "running"
        self.outcome: CallOutcome | None = None
        self.output = ""
        self.diff: str | None = None  # the change, as a unified diff numbered as the file
        self.expanded = False
        self.selected = False
        self.clock = clock
        self.started = clock()
        self.live = ""
        self.live_bytes = 0
        self.subagent: SubagentInfo | None = None
        self.asked_by = ""  # which subagent's call this is, for its approval
        self.waiting_since: float | None = None  # waiting for the person's approval since

    def bar(self, look: Look) -> Style | None:
        if self.selected:
            return look.selected
        return look.failed if self.status not in ("running", "ok") else look.tool

    def waiting(self, on: bool) -> None:
        """The call waits for the person's answer (on) or got it (off: it runs from now)."""
        if on:
            self.waiting_since = self.clock()
        elif self.waiting_since is not None:
            self.waiting_since = None
            self.started = self.clock()
        self.changed()

    def output_arrived(self, text: str) -> None:
        self.live_bytes += len(text)
        self.live = (self.live + text)[-LIVE_KEEP_CHARS:]
        self.changed()

    def finished(self, outcome: CallOutcome, output: str, diff: str | None) -> None:
        self.outcome = outcome
        self.status = outcome.status
        self.output = output
        if diff:
            self.diff = diff
        self.live = ""
        self.changed()

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self.changed()

    def text(self) -> str:
        return f"{self.tool} {self.summary}\n{self.output or self.live}"

    def estimate(self, width: int) -> int:
        return 3 + (COLLAPSED_LINES if self.output else 0)

    def _head(self) -> Text:
        """Mark, tool, how it stands (before the argument, so a narrow screen keeps it),
        the argument, the time."""
        mark, style = _MARKS.get(self.status, ("?", ""))
        head = Text()
        head.append(f"{mark} ", style=style)
        head.append(plain(self.tool, "bold"))
        if self.status == "running" and self.waiting_since is not None:
            head.append(f"  waiting for your approval {elapsed(self.clock() - self.waiting_since)}",
                        style="bold yellow")
        elif self.status == "running":
            head.append(f"  running {elapsed(self.clock() - self.started)}", style="yellow")
        elif self.outcome is not None and self.status != "ok":
            head.append(plain(f"  {self.outcome.label}", "bold red"))
        head.append("  ")
        head.append(plain(self.summary))
        if self.outcome is not None and self.status != "running":
            head.append(f"  {self.outcome.timing}", style="dim")
        return head

    def renderable(self, look: Look) -> RenderableType:
        parts: list[RenderableType] = [self._head()]
        if self.asked_by:
            parts.append(plain(f"  asked by {self.asked_by}", "dim"))
        if self.subagent is not None:
            parts.append(_subagent_text(self.subagent, self.expanded, self.clock))
        limit = EXPANDED_LINES if self.expanded else COLLAPSED_LINES
        width = 300 if self.expanded else 160
        if self.diff and self.status in ("running", "ok"):
            parts.append(unified_diff(self.diff, max_lines=60 if self.expanded else 12))
        if self.status == "running":
            if self.live:
                shown, _ = _tail_of(self.live, limit, width)
                parts.append(Text(shown, style="dim"))
                parts.append(Text(f"  output so far: {self.live_bytes:,} characters"
                                  + ("" if self.expanded else " (Ctrl+O shows more)"),
                                  style="dim italic"))
            return Group(*parts)
        outcome = self.outcome
        if outcome is not None and self.status != "ok" and not self.expanded:
            # Collapsed, a failure shows why: the lines that explain it, not the first four.
            if outcome.tail:
                parts.append(plain(outcome.tail, "red"))
            more = self.output.count("\n") + 1 if self.output else 0
            parts.append(Text(f"  … the whole output: {_lines(more)} (Ctrl+O, or o on the "
                              "selected card)", style="dim italic"))
            return Group(*parts)
        output = self.output
        if output and (self.tool not in ("edit", "write") or self.expanded or self.status != "ok"):
            shown, left, cut = clip_lines(output, max_lines=limit, max_width=width)
            parts.append(Text(shown, style="dim" if self.status == "ok" else ""))
            if left or cut:
                what = f"{left:,} more line{'s' if left != 1 else ''}" if left else "long lines cut"
                key = "o: collapse" if self.expanded else "Ctrl+O: expand"
                extra = "; the whole result is in the event log" if self.expanded else ""
                parts.append(Text(f"  … {what} ({key}{extra})", style="dim italic"))
        return Group(*parts)


def _tail_of(text: str, max_lines: int, width: int) -> tuple[str, int]:
    lines = text.rstrip("\n").split("\n")
    kept = lines[-max_lines:]
    shown = "\n".join(ln if len(ln) <= width else ln[:width] + "…" for ln in kept)
    return visible(shown), len(lines) - len(kept)


def _subagent_text(sub: SubagentInfo, expanded: bool, clock: Any) -> Text:
    """The nested card of a subagent: type, task, status, age and budget, its current calls."""
    style = {"running": "yellow", "done": "green"}.get(sub.status, "red")
    out = Text("  ↳ subagent ", style="dim")
    out.append(plain(sub.agent_type, "bold"))
    out.append(plain(f": {sub.description}  "))
    out.append(plain(sub.status, style))
    if sub.status == "running":
        out.append(f" {elapsed(clock() - sub.started)}", style="yellow")
    budget = ", ".join(f"{k} {sub.spent.get(k, 0):g}/{v:g}" if sub.spent else f"{k} {v:g}"
                       for k, v in sub.reserved.items()) or \
        ", ".join(f"{k} {v:g}" for k, v in sub.spent.items())
    if budget:
        out.append(plain(f"  budget {budget}", "dim"))
    calls = list(sub.calls.values())
    shown = calls if expanded else calls[-3:]
    if len(calls) > len(shown):
        out.append(plain(f"\n    … {len(calls) - len(shown)} earlier calls", "dim"))
    for tool, summary, status in shown:
        mark, mstyle = _MARKS.get(status.split(" ", 1)[0], ("•", "dim"))
        out.append(f"\n    {mark} ", style=mstyle)
        out.append(plain(tool, "bold"))
        out.append(plain(f"  {summary[:100]}"))
        if status not in ("running", "ok"):
            out.append(plain(f"  {status.replace('_', ' ')}", "red"))
    if expanded:
        out.append(plain(f"\n    session {sub.child}", "dim"))
        if sub.files:
            out.append(plain("\n    changed: " + ", ".join(str(f) for f in sub.files[:20]), "dim"))
        for c in sub.commands[:20]:
            out.append(plain(f"\n    $ {c.get('command', c) if isinstance(c, dict) else c}", "dim"))
    return out

