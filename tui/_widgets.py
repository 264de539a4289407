"""The transcript's widgets: a prompt, a streamed reply, a tool card, a notice.

Each is one widget holding one renderable (not a tree of widgets per line),
so a long session costs a few objects per message, and the transcript keeps
only a window of them mounted (see ``tui._transcript``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from tui._render import code, diff_for, key_argument, markdown, plain
from tui._safe import clip_lines
from tui._stream import Block, BlockSplitter

__all__ = ["AssistantBlock", "Notice", "ToolCard", "UserBlock"]

COLLAPSED_LINES = 4
EXPANDED_LINES = 400


class UserBlock(Static):
    """What the person typed (a prompt, or a steer sent mid-run)."""

    DEFAULT_CSS = "UserBlock { margin: 1 0 0 0; padding: 0 1; border-left: thick $accent; }"

    def __init__(self, text: str, kind: str = "prompt") -> None:
        label = "steer › " if kind == "steer" else "› "
        shown, left, _ = clip_lines(text, max_lines=40, max_width=2000)
        body = Text(label, style="bold") + plain(shown)
        if left:
            body.append(f"\n… {left:,} more lines (all of them went to the model)", style="dim")
        super().__init__(body)


class Notice(Static):
    """A line from Abhed itself: a run's end, an error, a command's answer."""

    DEFAULT_CSS = """
    Notice { color: $text-muted; padding: 0 1; }
    Notice.error { color: $error; }
    """

    def __init__(self, text: str | RenderableType, *, error: bool = False) -> None:
        super().__init__(plain(text) if isinstance(text, str) else text,
                         classes="error" if error else "")


def _render_block(block: Block) -> RenderableType:
    return code(block.text, block.lang) if block.kind == "code" else markdown(block.text)


class AssistantBlock(Vertical):
    """The model's reply: finished blocks frozen as they complete, one live tail.

    :meth:`feed` only buffers; :meth:`tick` (the app's render clock) mounts
    the blocks that finished since and re-renders the tail once.
    """

    DEFAULT_CSS = """
    AssistantBlock { height: auto; margin: 1 0 0 0; padding: 0 1; }
    AssistantBlock > Static { height: auto; }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.splitter = BlockSplitter()
        self.text = ""
        self.finished = False
        self._tail = Static("", classes="tail")
        self._dirty = False
        self._pending_done: list[Block] = []
        if text:
            self.feed(text)

    def compose(self) -> ComposeResult:
        yield self._tail

    def feed(self, text: str) -> None:
        if text:
            self.text += text
            self.splitter.feed(text)
            self._dirty = True

    def tick(self) -> None:
        """Render what arrived since the last tick: new frozen blocks, then the tail."""
        if not self._dirty or not self.is_mounted:
            return
        self._dirty = False
        done = self.splitter.take()
        if done:
            self.mount_all([Static(_render_block(b)) for b in done], before=self._tail)
        tail = self.splitter.tail
        if tail is None:
            self._tail.update("")
        elif tail.kind == "code":
            # The open piece of a fence is shown plain; it is highlighted once, when it freezes.
            self._tail.update(plain(tail.text))
        else:
            self._tail.update(_render_block(tail))

    def finish(self, final_text: str | None = None) -> None:
        """The reply is complete; ``final_text`` (the recorded turn) wins if the stream differed."""
        if final_text is not None and final_text != self.text:
            for child in list(self.children):
                if child is not self._tail:
                    child.remove()
            self.splitter = BlockSplitter()
            self.text = ""
            self.feed(final_text)
        self.finished = True
        done = self.splitter.finish()
        if self.is_mounted:
            if done:
                self.mount_all([Static(_render_block(b)) for b in done], before=self._tail)
            self._tail.update("")
        else:
            self._pending_done = done

    def on_mount(self) -> None:
        done = self._pending_done
        if done:
            self.mount_all([Static(_render_block(b)) for b in done], before=self._tail)
            self._pending_done = []
        elif self._dirty:
            self.call_after_refresh(self.tick)  # is_mounted is only true once on_mount returns


class ToolCard(Static, can_focus=True):
    """A tool call: tool, key argument, status, duration; output collapsed with a key to expand.

    Its state lives in ``entry.data`` (call_id, tool, args, status, output,
    error_code, duration_ms, start_line, expanded), so the transcript can
    unmount the card and rebuild it identically later.
    """

    BINDINGS = [Binding("enter,o", "toggle_card", "expand/collapse", show=False)]
    DEFAULT_CSS = """
    ToolCard { margin: 1 0 0 0; padding: 0 1; border-left: thick $secondary; height: auto; }
    ToolCard:focus { border-left: thick $accent; background: $boost; }
    ToolCard.failed { border-left: thick $error; }
    """

    def __init__(self, entry: Any) -> None:
        super().__init__("")
        self.entry = entry
        self.data: dict[str, Any] = entry.data
        self.data.setdefault("status", "running")

    def on_mount(self) -> None:
        self.refresh_card()

    def set_result(self, ok: bool, content: str, error_code: str, duration_ms: float,
                   details: dict[str, Any]) -> None:
        record_result(self.data, ok, content, error_code, duration_ms, details)
        self.refresh_card()

    def action_toggle_card(self) -> None:
        self.data["expanded"] = not self.data.get("expanded", False)
        self.refresh_card()

    def refresh_card(self) -> None:
        self.set_class(self.data["status"] == "failed", "failed")
        self.update(card_renderable(self.data))


def record_result(data: dict[str, Any], ok: bool, content: str, error_code: str,
                  duration_ms: float, details: dict[str, Any]) -> None:
    """Store a call's result in a card's data (whether or not the card is mounted)."""
    data.update(status="ok" if ok else "failed", output=content, error_code=error_code,
                duration_ms=duration_ms)
    lines = details.get("lines")
    if isinstance(lines, list) and lines and isinstance(lines[0], int):
        data["start_line"] = lines[0]


def _subagent_text(sub: dict[str, Any], expanded: bool) -> Text:
    """The nested card of a subagent: its type, task, status and budget (spent of reserved)."""
    status = str(sub.get("status", "running"))
    style = {"running": "yellow", "done": "green"}.get(status, "red")
    out = Text("  ↳ subagent ", style="dim")
    out.append(plain(str(sub.get("agent_type", "")), "bold"))
    out.append(plain(f": {sub.get('description', '')}  "))
    out.append(plain(status, style))
    reserved = sub.get("reserved") or {}
    spent = sub.get("spent") or {}
    budget = ", ".join(f"{k} {spent.get(k, 0):g}/{v:g}" if spent else f"{k} {v:g}"
                       for k, v in reserved.items()) or ", ".join(f"{k} {v:g}" for k, v in spent.items())
    if budget:
        out.append(plain(f"  budget {budget}", "dim"))
    if expanded:
        out.append(plain(f"\n    session {sub.get('child', '')}", "dim"))
        files = sub.get("files") or []
        if files:
            out.append(plain("\n    changed: " + ", ".join(str(f) for f in files[:20]), "dim"))
        for c in (sub.get("commands") or [])[:20]:
            out.append(plain(f"\n    $ {c.get('command', c) if isinstance(c, dict) else c}", "dim"))
    return out


def card_renderable(d: dict[str, Any]) -> RenderableType:
    status = d.get("status", "running")
    tool = str(d.get("tool", ""))
    args = d.get("args")
    expanded = bool(d.get("expanded"))
    mark = {"running": "◌", "ok": "✓", "failed": "✗"}.get(status, "?")
    style = {"running": "yellow", "ok": "green", "failed": "red"}.get(status, "")
    head = Text()
    head.append(f"{mark} ", style=style)
    head.append(plain(tool, "bold"))
    head.append("  ")
    head.append(key_argument(tool, args))
    if d.get("duration_ms") is not None:
        head.append(f"  {d['duration_ms']:,.0f} ms", style="dim")
    if d.get("error_code"):
        head.append(plain(f"  {d['error_code']}", "red"))
    parts: list[RenderableType] = [head]
    sub = d.get("subagent")
    if isinstance(sub, dict):
        parts.append(_subagent_text(sub, expanded))
    diff = diff_for(tool, args, start_line=d.get("start_line"))
    if diff is not None and status != "failed":
        parts.append(diff)
    output = str(d.get("output", ""))
    if output and (tool not in ("edit", "write") or status == "failed" or expanded):
        limit = EXPANDED_LINES if expanded else COLLAPSED_LINES
        shown, left, cut = clip_lines(output, max_lines=limit, max_width=300 if expanded else 160)
        parts.append(Text(shown, style="dim" if status == "ok" else ""))
        if left or cut:
            what = f"{left:,} more lines" if left else "long lines cut"
            key = "Enter: collapse" if expanded else "Enter: expand"
            more = "; the whole result is in the event log" if expanded else ""
            parts.append(Text(f"… {what} ({key}{more})", style="dim italic"))
    return Group(*parts)
