"""Streamed model text, split into frozen blocks and one open tail.

Re-rendering the whole reply on every delta is O(n²) (pi-mono#8711,
opencode#6172), and Textual's ``Markdown.append`` re-parses the last block,
so a 2,000-line code fence is re-highlighted on each append.  Here the text
is cut at block boundaries as it arrives: a paragraph ends at a blank line, a
fence at its closing marker, and a long fence is cut every
:data:`CODE_CHUNK_LINES` lines.  Each finished piece is rendered once and
never again; only the open tail (at most one paragraph or one code chunk)
is re-rendered, once per tick of the app's render clock.

Pure logic, no Textual: :class:`BlockSplitter` is tested on its own.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models import Delta

__all__ = ["CODE_CHUNK_LINES", "Block", "BlockSplitter", "DeltaBuffer"]

CODE_CHUNK_LINES = 40
MAX_PENDING_OUTPUT = 256 * 1024  # command output waiting for the render clock
MAX_PARAGRAPH_LINES = 60  # a paragraph with no blank line is cut here, so the tail stays bounded
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")


@dataclass(frozen=True)
class Block:
    """A finished piece of a reply: Markdown text, or part of a code fence."""

    kind: str  # "markdown" | "code"
    text: str
    lang: str = ""
    continues: bool = False  # a later piece of a code fence cut at CODE_CHUNK_LINES


class BlockSplitter:
    """Feed text; take finished blocks as they complete; render :attr:`tail` each tick."""

    def __init__(self) -> None:
        self._partial = ""  # the text after the last newline
        self._lines: list[str] = []  # complete lines of the open block
        self._fence: str | None = None  # the open fence's marker, when inside one
        self._lang = ""
        self._done: list[Block] = []
        self._continuing = False  # the open fence already handed out a piece
        self.text_len = 0

    def feed(self, text: str) -> None:
        self.text_len += len(text)
        data = self._partial + text
        *complete, self._partial = data.split("\n")
        for line in complete:
            self._line(line)

    def _line(self, line: str) -> None:
        if self._fence is not None:
            stripped = line.strip()
            if stripped.startswith(self._fence[0]) and set(stripped) == {self._fence[0]} \
                    and len(stripped) >= len(self._fence):
                self._emit_code()
                self._fence = None
                self._continuing = False
                return
            self._lines.append(line)
            if len(self._lines) >= CODE_CHUNK_LINES:
                self._emit_code()
                self._continuing = True
            return
        m = _FENCE.match(line)
        if m:
            self._emit_markdown()
            self._fence, self._lang = m.group(1), m.group(2)
            return
        if not line.strip():
            self._emit_markdown()
            return
        self._lines.append(line)
        if len(self._lines) >= MAX_PARAGRAPH_LINES:
            self._emit_markdown()

    def _emit_markdown(self) -> None:
        if self._lines:
            self._done.append(Block("markdown", "\n".join(self._lines)))
        self._lines = []

    def _emit_code(self) -> None:
        if self._lines:
            self._done.append(Block("code", "\n".join(self._lines), self._lang, self._continuing))
        self._lines = []

    def take(self) -> list[Block]:
        """The blocks finished since the last call (each is handed out once)."""
        done, self._done = self._done, []
        return done

    @property
    def tail(self) -> Block | None:
        """The open block as it stands, partial last line included; None when empty."""
        lines = self._lines + ([self._partial] if self._partial else [])
        if not lines:
            return None
        if self._fence is not None:
            return Block("code", "\n".join(lines), self._lang, self._continuing)
        return Block("markdown", "\n".join(lines))

    def finish(self) -> list[Block]:
        """End of the reply: everything left becomes finished blocks."""
        if self._partial:
            partial, self._partial = self._partial, ""
            if self._fence is not None:
                self._lines.append(partial)
            else:
                self._line(partial)
        if self._fence is not None:
            self._emit_code()
            self._fence = None
            self._continuing = False
        else:
            self._emit_markdown()
        return self.take()


class DeltaBuffer:
    """Deltas from the agent's thread, drained by the UI's render clock (thread-safe).

    Each delta is stamped with how many events had been posted before it
    (``epoch``), and :meth:`drain` hands out only those whose events the UI has
    already handled: the render clock runs beside Textual's message queue, so
    without the stamp a loaded UI could draw the next turn's text before the
    tool card of the turn before it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[int, Delta]] = []
        self._outputs: list[tuple[int, str, str]] = []  # (epoch, call id, text)
        self._output_chars = 0
        self.posted = 0

    def event_posted(self) -> None:
        with self._lock:
            self.posted += 1

    def put(self, delta: Delta) -> None:
        with self._lock:
            self._items.append((self.posted, delta))

    def put_output(self, call_id: str, text: str) -> None:
        """A running command's output (bounded: past :data:`MAX_PENDING_OUTPUT` characters
        waiting, the oldest waiting text is dropped; the card says how much it saw)."""
        with self._lock:
            last = self._outputs[-1] if self._outputs else None
            if last is not None and last[0] == self.posted and last[1] == call_id:
                self._outputs[-1] = (last[0], call_id, last[2] + text)
            else:
                self._outputs.append((self.posted, call_id, text))
            self._output_chars += len(text)
            while self._output_chars > MAX_PENDING_OUTPUT and self._outputs:
                epoch, cid, old = self._outputs[0]
                over = self._output_chars - MAX_PENDING_OUTPUT
                if len(old) > over:
                    self._outputs[0] = (epoch, cid, old[over:])
                    self._output_chars -= over
                else:
                    self._outputs.pop(0)
                    self._output_chars -= len(old)

    def drain(self, handled: int | None = None) -> tuple[str, str | None, list[tuple[str, str]]]:
        """(text of the deltas that came after no more than ``handled`` events, the name of a
        tool call being streamed if any, commands' output as (call id, text)); ``None``
        drains everything."""
        with self._lock:
            if handled is None:
                ready, self._items = self._items, []
                outs, self._outputs = self._outputs, []
            else:
                cut = 0
                while cut < len(self._items) and self._items[cut][0] <= handled:
                    cut += 1
                ready, self._items = self._items[:cut], self._items[cut:]
                cut = 0
                while cut < len(self._outputs) and self._outputs[cut][0] <= handled:
                    cut += 1
                outs, self._outputs = self._outputs[:cut], self._outputs[cut:]
            self._output_chars -= sum(len(t) for _, _, t in outs)
        text = "".join(d.text for _, d in ready if d.kind == "text")
        names = [d.name for _, d in ready if d.kind != "text" and d.name]
        return text, (names[-1] if names else None), [(c, t) for _, c, t in outs]
