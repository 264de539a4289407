"""The approval card: exactly what will run, why policy asks, and the four answers.

Not a modal screen: the card sits above the composer and the transcript
above it stays scrollable (PgUp/PgDn, codex#22263).  What will run is shown
as it will run: a bash command is the text the model sent, every character
of it (a heredoc's body included), never a re-print of its parse; a write
or an edit is the diff against the file on disk, numbered as the file,
computed by the tool before asking.  Beside it, the parse's findings: why
policy asks, which commands need the answer, what "always" would store.

Only deliberate keys answer.  The card never takes the keyboard by itself:
typing goes on into the composer while it is open.  Shift+Tab moves to the
card; there y, a, n and r answer once the card has been on screen for
:data:`GUARD_S` (a card that appears as Shift+Tab is pressed for another
reason is not answered by the next key).  Tab goes back to the
composer, with what was typed there kept.  The answer keys are always on
screen (the part that shows what will run scrolls; the rest does not).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Static

from tui._link import PendingApproval
from tui._render import args_diff, plain, unified_diff

__all__ = ["GUARD_S", "ApprovalCard", "what_will_run"]

GUARD_S = 0.5


def what_will_run(p: PendingApproval) -> RenderableType:
    """The call as it will run: bash's command verbatim, a file change's diff, other arguments."""
    args = p.args if isinstance(p.args, dict) else {}
    command = args.get("command")
    if p.tool == "bash" and isinstance(command, str):
        out = Text()
        lines = command.split("\n")
        for n, line in enumerate(lines):
            out.append("$ " if n == 0 else "  ", style="dim")
            out.append(plain(line, "bold"))
            if n < len(lines) - 1:
                out.append("\n")
        parts: list[RenderableType] = [out]
        if len(lines) > 1:
            parts.append(Text(f"  ({len(lines)} lines, shown whole)", style="dim"))
        return Group(*parts)
    if p.preview:
        return unified_diff(p.preview, max_lines=400)
    diff = args_diff(p.tool, p.args)
    if diff is not None:
        return diff
    try:
        shown = json.dumps(p.args, ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        shown = str(p.args)
    return plain(shown[:20_000])


def findings(p: PendingApproval) -> RenderableType:
    """What policy found: why it asks, which commands need the answer, what "always" stores."""
    parts: list[RenderableType] = []
    args = p.args if isinstance(p.args, dict) else {}
    if isinstance(args.get("description"), str):
        parts.append(plain(f"the model says: {args['description']}", "italic"))
    why = p.reason + (f" ({p.decided_by})" if p.decided_by and p.decided_by not in p.reason
                      else "")
    parts.append(plain(f"why it asks: {why}", "yellow"))
    if p.tool == "bash" and p.commands:
        parts.append(plain("policy's parse found: " + "; ".join(p.commands), "yellow"))
    if p.always_rules:
        parts.append(plain("a stores, for this session: " + "; ".join(p.always_rules), "dim"))
    else:
        parts.append(Text("no \"always\" for this call: policy asks every time (a destructive "
                          "pattern, or nothing safe to store)", style="dim"))
    return Group(*parts)


def keys_line(p: PendingApproval, *, focused: bool, armed: bool) -> Text:
    keys = Text()
    if not focused:
        keys.append("Shift+Tab", style="bold reverse")
        keys.append(" to answer (typing goes on in the message box)  ")
    keys.append("[y]", style="bold green")
    keys.append(" allow once  ")
    if p.always_rules:
        keys.append("[a]", style="bold green")
        keys.append(" allow always  ")
    keys.append("[n]", style="bold red")
    keys.append(" deny  ")
    keys.append("[r]", style="bold red")
    keys.append(" deny with a reason")
    if focused:
        keys.append("  Tab: back to typing", style="dim")
        if not armed:
            keys.append("  (keys count in a moment)", style="dim")
    return keys


class ApprovalCard(Vertical, can_focus=True):
    """Shows one :class:`PendingApproval`; answers it by key, then posts :class:`Answered`."""

    DEFAULT_CSS = """
    ApprovalCard { height: auto; border: round $warning; padding: 0 1; }
    ApprovalCard:focus-within { border: round $accent; }
    ApprovalCard > #what { height: auto; max-height: 12; scrollbar-size-vertical: 1; }
    ApprovalCard > #what > Static { height: auto; }
    ApprovalCard > Input { display: none; }
    ApprovalCard.reason > Input { display: block; }
    """

    @dataclass
    class Answered(Message):
        pending: PendingApproval
        decision: str

    @dataclass
    class Leave(Message):
        """Tab (or a typed character) on the card: back to the composer, with ``text`` typed."""

        text: str = ""

    def __init__(self, pending: PendingApproval, *, asked_by: str = "",
                 clock: Callable[[], float] = time.monotonic, guard_s: float = GUARD_S) -> None:
        super().__init__()
        self.pending = pending
        self.asked_by = asked_by
        self.clock = clock
        self.guard_s = guard_s
        self.shown_at = clock()
        title = Text()
        title.append("Approve ", style="bold")
        title.append(plain(pending.tool, "bold reverse"))
        title.append("?")
        if asked_by:
            title.append(plain(f"  asked by {asked_by}", "bold yellow"))
        self._title = Static(title)
        self._what = VerticalScroll(Static(Group(what_will_run(pending), Text(""),
                                                 findings(pending))), id="what")
        self._what.can_focus = False
        self._keys = Static(keys_line(pending, focused=False, armed=False), id="keys")
        self._reason = Input(placeholder="why not? (Enter sends it to the model, Esc goes back)")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._what
        yield self._keys
        yield self._reason

    def fit(self, screen_height: int) -> None:
        """Keep the answer keys on screen: what will run gets what is left, and scrolls."""
        self._what.styles.max_height = max(2, screen_height - 13)

    @property
    def armed(self) -> bool:
        return self.clock() - self.shown_at >= self.guard_s

    def _show_keys(self, focused: bool | None = None) -> None:
        focused = self.has_focus if focused is None else focused
        self._keys.update(keys_line(self.pending, focused=focused, armed=self.armed))

    def on_focus(self) -> None:
        # (this runs before Widget's own handler sets has_focus)
        self._show_keys(True)
        left = self.shown_at + self.guard_s - self.clock()
        if left > 0:
            self.set_timer(left, self._show_keys)

    def on_blur(self) -> None:
        self._show_keys(False)

    def on_key(self, event: events.Key) -> None:
        if self.has_class("reason"):
            if event.key == "escape":
                event.stop()
                self.remove_class("reason")
                self.focus()
            return
        key = event.key
        if key in ("up", "down", "pageup", "pagedown"):
            return  # PgUp/PgDn scroll the conversation (the app's); Up/Down this card
        event.stop()
        if key in ("tab", "enter"):
            self.post_message(self.Leave())
            return
        if key not in ("y", "a", "n", "r"):
            if event.is_printable and event.character:
                self.post_message(self.Leave(event.character))  # typing: back to the composer
            return
        if not self.armed:
            self._keys.update(keys_line(self.pending, focused=True, armed=False)
                              + Text("  (too soon after the card appeared: press again)",
                                     style="bold yellow"))
            return
        if key == "y":
            self._answer("allow")
        elif key == "a" and self.pending.always_rules:
            self._answer("allow", always=True)
        elif key == "n":
            self._answer("deny", reason="denied by the user")
        elif key == "r":
            self.add_class("reason")
            self._reason.focus()

    def key_up(self) -> None:
        self._what.scroll_up(animate=False)

    def key_down(self) -> None:
        self._what.scroll_down(animate=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._answer("deny", reason=event.value.strip() or "denied by the user")

    def _answer(self, decision: str, *, always: bool = False, reason: str = "") -> None:
        self.pending.answer(decision, always=always, reason=reason)
        label = "allow always" if always else ("deny" if decision == "deny" else "allow once")
        self.post_message(self.Answered(self.pending, label + (f": {reason}" if reason and
                                                               decision == "deny" else "")))
