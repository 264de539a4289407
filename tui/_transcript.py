"""The conversation: every message reachable by scrolling, drawn only near the screen.

One widget draws the whole session line by line (Textual's line API), so
there is no widget per message to mount, unmount or re-measure.  Every
entry has a height at the current width: measured once drawn, estimated
from its text until then; the scroll range is their sum, so PgUp, PgDn,
Home, End and the scrollbar reach every message in order (no window to
page past).  Before a frame, :meth:`Transcript.settle` draws the entries
on and around the screen, corrects their heights, and keeps the line at
the top of the screen where it was; entries further than :data:`KEEP`
screens away forget their drawn lines.  Memory is then the session's text
plus what is on screen and a fixed margin, however the session is browsed
(claude-code#4953, opencode#16697).

The view follows the conversation while it is at the bottom; scrolled up,
it stays put and ``unseen`` says new output arrived below.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip

from tui._entries import Entry, Look, ToolEntry

__all__ = ["KEEP", "Transcript"]

KEEP = 2  # screens of drawn lines kept above and below the screen
_STRIP_CACHE = 400  # finished lines kept (a few screens' worth)
_FORGET_AFTER = 48  # entries drawn before those far from the screen are forgotten


class Transcript(ScrollView, can_focus=True):
    """Entries in order, drawn near the screen; a selected tool card is toggled with o."""

    ALLOW_SELECT = True
    COMPONENT_CLASSES = {"transcript--user", "transcript--tool", "transcript--failed",
                         "transcript--selected", "transcript--muted", "transcript--error",
                         "transcript--warning"}
    DEFAULT_CSS = """
    Transcript { height: 1fr; scrollbar-size-vertical: 1; overflow-x: hidden; }
    Transcript > .transcript--user { color: $accent; text-style: bold; }
    Transcript > .transcript--tool { color: $secondary; }
    Transcript > .transcript--failed { color: $error; text-style: bold; }
    Transcript > .transcript--selected { color: $warning; text-style: bold; }
    Transcript > .transcript--muted { color: $text-muted; }
    Transcript > .transcript--error { color: $error; }
    Transcript > .transcript--warning { color: $warning; }
    Transcript:focus { background-tint: $foreground 3%; }
    """

    @dataclass
    class Unseen(Message):
        """New output arrived below while scrolled up (or the view caught up with it)."""

        unseen: bool

    @dataclass
    class Leave(Message):
        """Back to the composer (Tab, Enter, or typing: ``text`` is what was typed)."""

        text: str = ""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.entries: list[Entry] = []
        self.follow = True  # at the bottom: new output scrolls into view
        self.unseen = False
        self.selected: ToolEntry | None = None
        self._width = 0
        self._heights: list[int] = []
        self._measured: list[bool] = []
        self._offsets: list[int] = [0]  # _offsets[i]: first line of entry i; last: total
        self._offsets_valid = True
        self._drawn: set[int] = set()  # entries holding drawn lines
        self._moving = False  # scroll_y being set by this class, not by the person
        self._look: Look | None = None
        self._style: Style | None = None  # the widget's own style, applied under every line
        # the last lines drawn, as Textual wants them (offsets applied): a frame that only
        # scrolls redraws no line; keyed so that any change to what a line shows misses
        self._strips: dict[tuple[object, ...], Strip] = {}
        self.on_toggle: Callable[[ToolEntry], None] | None = None
        self.forgot = 0  # entries that forgot their drawn lines (the app trims memory after)
        self._bulk = False

    # -- geometry ----------------------------------------------------------------
    @property
    def line_width(self) -> int:
        return max(10, self.scrollable_content_region.width)

    @property
    def look(self) -> Look:
        if self._look is None:
            def style(name: str) -> Style:
                return self.get_component_rich_style(f"transcript--{name}", partial=True)
            self._look = Look(user=style("user"), tool=style("tool"), failed=style("failed"),
                              selected=style("selected"), muted=style("muted"),
                              error=style("error"), warning=style("warning"))
        return self._look

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._look = None
        self._style = None
        self._strips.clear()

    def _offsets_now(self) -> list[int]:
        if not self._offsets_valid:
            out = [0]
            total = 0
            for h in self._heights:
                total += h
                out.append(total)
            self._offsets = out
            self._offsets_valid = True
        return self._offsets

    @property
    def total_lines(self) -> int:
        return self._offsets_now()[-1]

    def entry_at(self, line: int) -> int | None:
        """Index of the entry drawn on ``line`` (absolute), or None past the end."""
        offsets = self._offsets_now()
        if not self.entries or line < 0 or line >= offsets[-1]:
            return None
        return bisect.bisect_right(offsets, line) - 1

    def _set_height(self, i: int, h: int) -> None:
        if self._heights[i] != h:
            self._heights[i] = h
            self._offsets_valid = False

    def _measure(self, i: int) -> None:
        entry = self.entries[i]
        self._set_height(i, entry.height(self.app.console, self.line_width, self.look))
        self._measured[i] = True
        self._drawn.add(i)

    def _rewidth(self) -> None:
        width = self.line_width
        if width == self._width:
            return
        self._width = width
        for i in self._drawn:
            self.entries[i].drop()
        self._drawn.clear()
        self._heights = [e.estimate(width) for e in self.entries]
        self._measured = [False] * len(self.entries)
        self._offsets_valid = False

    # -- content -------------------------------------------------------------------
    def add(self, entry: Entry) -> Entry:
        """Append a message; it scrolls into view when the view follows the conversation."""
        entry.index = len(self.entries)
        self.entries.append(entry)
        width = self.line_width if self._width else 80
        self._heights.append(entry.estimate(width))
        self._measured.append(False)
        self._offsets_valid = False
        self._changed_content(len(self.entries) - 1)
        return entry

    def changed(self, entry: Entry) -> None:
        """``entry`` changed (streamed text, a result, a toggle): redraw what shows it."""
        i = entry.index
        if 0 <= i < len(self.entries) and self.entries[i] is entry:
            self._changed_content(i)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Add many entries at once (a resumed session's log): each is only estimated; the
        ones that end up near the screen are drawn once, at the end."""
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
            self._offsets_valid = False
            if self.is_mounted and self.size.width:
                self._refit()
                self.follow_end()

    def _changed_content(self, i: int) -> None:
        if self._bulk:
            return
        if not self.is_mounted or self.size.width == 0:
            return  # laid out later: on_resize measures what is on screen
        self._rewidth()
        top = int(self.scroll_y)
        anchor = self.entry_at(top)
        into = top - self._offsets_now()[anchor] if anchor is not None else 0
        below = anchor is None or i >= self._last_visible()
        if self.follow or self._measured[i] or i in self._drawn:
            self._measure(i)
        self._refit()
        if self.follow:
            self._scroll_to_line(self.max_scroll_y)
            if len(self._drawn) > _FORGET_AFTER:
                self._forget_far()  # what scrolled off the top while following
        else:
            if anchor is not None and anchor != i:  # what is on screen stays where it is
                moved = self._offsets_now()[anchor] + into
                if moved != top:
                    self._scroll_to_line(moved)
            if below:
                self._set_unseen(True)
        self.refresh()

    def clear_entries(self) -> None:
        self._strips.clear()
        self.entries = []
        self._heights = []
        self._measured = []
        self._drawn.clear()
        self._offsets_valid = False
        self.selected = None
        self.follow = True
        self._set_unseen(False)
        self._refit()
        self.refresh()

    def _refit(self) -> None:
        self.virtual_size = Size(self.line_width, self.total_lines)

    # -- scrolling -----------------------------------------------------------------
    def _scroll_to_line(self, y: float) -> None:
        self._moving = True
        try:
            self.scroll_to(y=y, animate=False, immediate=True, force=True)
        finally:
            self._moving = False

    def _first_visible(self) -> int:
        return self.entry_at(int(self.scroll_y)) or 0

    def _last_visible(self) -> int:
        last = self.entry_at(int(self.scroll_y) + max(1, self.size.height) - 1)
        return len(self.entries) - 1 if last is None else last

    def settle(self) -> None:
        """Draw the entries on and near the screen, correct heights, keep the top line put."""
        if not self.entries or not self.is_mounted:
            return
        self._rewidth()
        screen = max(1, self.size.height)
        top = int(self.scroll_y)
        anchor = self.entry_at(top)
        if anchor is None:
            anchor = len(self.entries) - 1
        into = top - self._offsets_now()[anchor]
        for _ in range(4):  # measuring changes heights, which can bring more into view
            offsets = self._offsets_now()
            lo = self.entry_at(max(0, top - screen)) or 0
            hi = self.entry_at(min(offsets[-1] - 1, top + 2 * screen))
            hi = len(self.entries) - 1 if hi is None else hi
            todo = [i for i in range(lo, hi + 1) if not self._measured[i]]
            if not todo:
                break
            for i in todo:
                self._measure(i)
            top = self._offsets_now()[anchor] + min(into, max(0, self._heights[anchor] - 1))
        self._refit()
        if self.follow:
            self._scroll_to_line(self.max_scroll_y)
        elif top != int(self.scroll_y):
            self._scroll_to_line(top)
        self._forget_far()

    def _forget_far(self) -> None:
        """Entries further than KEEP screens from the screen forget their drawn lines."""
        screen = max(1, self.size.height)
        offsets = self._offsets_now()
        lo_line = int(self.scroll_y) - KEEP * screen
        hi_line = int(self.scroll_y) + (KEEP + 1) * screen
        for i in list(self._drawn):
            if offsets[i + 1] < lo_line or offsets[i] > hi_line:
                self.entries[i].drop()
                self._drawn.discard(i)
                self.forgot += 1

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self._moving:
            self.follow = new_value >= self.max_scroll_y
            self.call_later(self.settle)
        if self.follow or new_value >= self.max_scroll_y:
            self._set_unseen(False)

    def on_resize(self, event: events.Resize) -> None:
        self._rewidth()
        self.settle()

    def _set_unseen(self, value: bool) -> None:
        if value != self.unseen:
            self.unseen = value
            self.post_message(self.Unseen(value))

    def follow_end(self) -> None:
        """Back to the newest output, following it again (End, Ctrl+End, sending a prompt)."""
        self.follow = True
        self.settle()
        self._scroll_to_line(self.max_scroll_y)
        self._set_unseen(False)

    def page(self, direction: int) -> None:
        """One screen up or down, a line of overlap kept."""
        step = max(1, self.size.height - 1)
        self.follow = False
        target = max(0, min(self.max_scroll_y, int(self.scroll_y) + direction * step))
        self._scroll_to_line(target)
        self.settle()
        if direction > 0 and self.scroll_y >= self.max_scroll_y:
            self.follow_end()

    def home(self) -> None:
        self.follow = False
        self._scroll_to_line(0)
        self.settle()

    # -- drawing ---------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self._width or self.line_width
        line = int(self.scroll_y) + y
        base = self._base_style()
        i = self.entry_at(line)
        if i is None or self._width == 0:
            return Strip.blank(width, base)
        entry = self.entries[i]
        local = line - self._offsets_now()[i]
        if not self._measured[i]:
            self.call_later(self.settle)  # drawn from its estimate this once
        self._drawn.add(i)
        selection = self.text_selection
        span = selection.get_span(line) if selection is not None else None
        key = (i, entry.stamp(local), local, line, width, span)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        strip = entry.line(self.app.console, width, self.look, local)
        strip = strip.crop_extend(0, width, base).apply_style(base)
        if span is not None:
            start, end = span
            end = width if end == -1 else end
            sel = self.screen.get_component_rich_style("screen--selection")
            strip = Strip.join([strip.crop(0, start),
                                strip.crop(start, end).apply_style(sel), strip.crop(end)])
        strip = strip.apply_offsets(0, line)
        self._strips[key] = strip
        if len(self._strips) > _STRIP_CACHE:
            for old in list(self._strips)[: _STRIP_CACHE // 4]:
                del self._strips[old]
        return strip

    def _base_style(self) -> Style:
        if self._style is None:
            self._style = self.rich_style
        return self._style

    # -- selection (mouse) ---------------------------------------------------------
    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        start = selection.start.y if selection.start is not None else 0
        end = selection.end.y if selection.end is not None else self.total_lines - 1
        end = min(end, start + 5000)  # a selection is of what one can see, give or take
        rows: list[str] = []
        for line in range(start, end + 1):
            i = self.entry_at(line)
            if i is None:
                break
            e = self.entries[i]
            strip = e.line(self.app.console, self.line_width, self.look,
                           line - self._offsets_now()[i])
            rows.append(strip.text.rstrip())
        text = "\n" * start + "\n".join(rows)
        return selection.extract(text), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()

    # -- cards -------------------------------------------------------------------------
    def cards(self) -> list[ToolEntry]:
        return [e for e in self.entries if isinstance(e, ToolEntry)]

    def select(self, entry: ToolEntry | None) -> None:
        """Mark a tool card as the one o toggles (Up/Down move the mark when focused)."""
        old = self.selected
        if old is entry:
            return
        self.selected = entry
        for e in (old, entry):
            if e is not None:
                e.selected = e is entry
                e.changed()
                self.changed(e)
        if entry is not None:
            self.show_entry(entry)

    def show_entry(self, entry: Entry) -> None:
        """Scroll so ``entry`` is on screen (its top, if it is taller than the screen)."""
        i = entry.index
        if not (0 <= i < len(self.entries) and self.entries[i] is entry):
            return
        self._rewidth()
        self._measure(i)
        self._refit()
        top, bottom = self._offsets_now()[i], self._offsets_now()[i + 1]
        view = int(self.scroll_y)
        screen = max(1, self.size.height)
        if top < view:
            self.follow = False
            self._scroll_to_line(top)
        elif bottom > view + screen:
            self._scroll_to_line(min(top, bottom - screen))
            self.follow = self.scroll_y >= self.max_scroll_y
        self.settle()

    def move_selection(self, step: int) -> None:
        cards = self.cards()
        if not cards:
            return
        if self.selected is None or self.selected not in cards:
            self.select(cards[-1])
            return
        k = cards.index(self.selected) + step
        self.select(cards[max(0, min(len(cards) - 1, k))])

    def on_key(self, event: events.Key) -> None:
        """Focused: Up/Down pick a tool card, o or Space toggles it; Tab or Enter go back to
        the composer, and anything typed goes there too (never lost, never a toggle)."""
        key = event.key
        if key in ("up", "down", "k", "j"):
            self.move_selection(-1 if key in ("up", "k") else 1)
        elif key in ("o", "space"):
            if self.selected is not None:
                self.selected.toggle()
                self.changed(self.selected)
        elif key in ("tab", "enter"):
            self.post_message(self.Leave())
        elif key in ("home", "end"):
            self.home() if key == "home" else self.follow_end()
        elif event.is_printable and event.character:
            self.post_message(self.Leave(event.character))
        else:
            return
        event.stop()
        event.prevent_default()

    def on_blur(self) -> None:
        self.select(None)

    def on_click(self, event: events.Click) -> None:
        i = self.entry_at(int(self.scroll_y) + event.y)
        if i is not None and isinstance(self.entries[i], ToolEntry) and event.chain == 1:
            entry = self.entries[i]
            assert isinstance(entry, ToolEntry)
            self.select(entry)
            entry.toggle()
            self.changed(entry)
