"""The conversation, with a bounded number of widgets whatever the session's length.

Every message is kept as a small :class:`Entry` (its data, not its
rendering), and only a window of at most :data:`WINDOW` entries is mounted
as widgets.  Scrolling to the top mounts the previous :data:`BATCH` and
unmounts as many at the far end; new messages while the window is at the end
push the oldest out.  Memory then grows with the text of the session, never
with its rendered widgets (claude-code#4953, opencode#16697).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from tui._widgets import AssistantBlock, Notice, ToolCard, UserBlock

__all__ = ["BATCH", "WINDOW", "Entry", "Transcript"]

WINDOW = 120
BATCH = 40


@dataclass(eq=False)
class Entry:
    """One message: ``kind`` is user, assistant, tool or notice; ``data`` what rebuilds it."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    widget: Widget | None = None

    def build(self) -> Widget:
        d = self.data
        if self.kind == "user":
            return UserBlock(d["text"], d.get("kind", "prompt"))
        if self.kind == "assistant":
            block = AssistantBlock()
            block.feed(d.get("text", ""))
            if d.get("finished", True):
                block.finish()
            return block
        if self.kind == "tool":
            return ToolCard(self)
        return Notice(d.get("text", ""), error=bool(d.get("error")))


class Transcript(VerticalScroll):
    """Entries in order; a window of them mounted, stubs saying how many are not."""

    DEFAULT_CSS = """
    Transcript { height: 1fr; scrollbar-size-vertical: 1; }
    Transcript > .stub { color: $text-muted; text-style: italic; padding: 0 1; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.entries: list[Entry] = []
        self.first = 0  # index of the first mounted entry
        self.last = -1  # index of the last mounted entry
        self.deferred = False  # while replaying a session's log: keep entries, mount none
        self._top = Static("", classes="stub")
        self._bottom = Static("", classes="stub")

    def on_mount(self) -> None:
        self.mount(self._top)
        self.mount(self._bottom)
        self._stubs()
        self.anchor()

    @property
    def at_end(self) -> bool:
        return self.last == len(self.entries) - 1

    def add(self, entry: Entry) -> Entry:
        """Append a message; mounted at once when the window is at the end."""
        was_at_end = self.at_end
        self.entries.append(entry)
        if self.deferred:
            return entry
        if was_at_end:
            if self.last < self.first:
                self.first = len(self.entries) - 1
            self.last = len(self.entries) - 1
            entry.widget = entry.build()
            self.mount(entry.widget, before=self._bottom)
            self._trim_top()
        self._stubs()
        return entry

    def clear_entries(self) -> None:
        for e in self.entries:
            if e.widget is not None:
                e.widget.remove()
                e.widget = None
        self.entries = []
        self.first, self.last = 0, -1
        self._stubs()

    def mounted(self) -> list[Entry]:
        return [e for e in self.entries[self.first:self.last + 1] if e.widget is not None]

    def _unmount(self, entry: Entry) -> None:
        if entry.widget is not None:
            if isinstance(entry.widget, AssistantBlock):
                entry.data["text"] = entry.widget.text
                entry.data["finished"] = entry.widget.finished
            entry.widget.remove()
            entry.widget = None

    def _trim_top(self) -> None:
        while self.last - self.first + 1 > WINDOW:
            entry = self.entries[self.first]
            if isinstance(entry.widget, AssistantBlock) and not entry.widget.finished:
                break  # the reply being streamed stays
            self._unmount(entry)
            self.first += 1

    def _stubs(self) -> None:
        above = self.first
        below = len(self.entries) - 1 - self.last
        self._top.update(f"▲ {above:,} earlier messages (Home, or scroll up, to show them)"
                         if above else "")
        self._top.display = bool(above)
        self._bottom.update(f"▼ {below:,} newer messages (End to jump to the latest)"
                            if below else "")
        self._bottom.display = bool(below)

    def show_earlier(self) -> bool:
        """Mount the previous batch above the window (unmounting as many at its end)."""
        if self.first == 0:
            return False
        start = max(0, self.first - BATCH)
        anchor = self.entries[self.first].widget
        widgets = []
        for e in self.entries[start:self.first]:
            e.widget = e.build()
            widgets.append(e.widget)
        self.mount_all(widgets, before=anchor if anchor is not None else self._bottom)
        self.first = start
        while self.last - self.first + 1 > WINDOW:
            self._unmount(self.entries[self.last])
            self.last -= 1
        self._stubs()
        return True

    def replayed(self) -> None:
        """End of a replay: mount only the newest window of what was added."""
        self.deferred = False
        self.show_latest()

    def show_latest(self) -> None:
        """Move the window back to the end of the conversation."""
        if self.at_end and self.last >= self.first:
            self.scroll_end(animate=False)
            return
        for e in self.entries[self.first:self.last + 1]:
            self._unmount(e)
        self.first = max(0, len(self.entries) - WINDOW)
        self.last = len(self.entries) - 1
        widgets = []
        for e in self.entries[self.first:]:
            e.widget = e.build()
            widgets.append(e.widget)
        self.mount_all(widgets, before=self._bottom)
        self._stubs()
        self.scroll_end(animate=False)
        self.anchor()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new <= 0 and old > 0 and self.first > 0:
            self.call_after_refresh(self.show_earlier)
