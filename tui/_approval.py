"""The approval card: what will run, why policy asks, and the four answers.

Not a modal screen: the card sits above the composer, the transcript above
it stays scrollable (PgUp/PgDn work while it has focus, codex#22263), and
its keys answer only after :data:`GUARD_S` so keys typed before it appeared
do not answer it (the type-ahead guard).  "Allow always" shows the exact
rule policy would store; destructive calls get no "always" because policy
offers none for them (their ``always_rules`` is empty).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from tui._link import PendingApproval
from tui._render import diff_for, plain

__all__ = ["GUARD_S", "ApprovalCard"]

GUARD_S = 0.5


def card_text(p: PendingApproval, armed: bool) -> RenderableType:
    parts: list[RenderableType] = []
    title = Text()
    title.append("Approve ", style="bold")
    title.append(plain(p.tool, "bold reverse"))
    title.append("?")
    parts.append(title)
    if p.commands:
        for cmd in p.commands:
            parts.append(plain(f"  $ {cmd}", "bold"))
    elif isinstance(p.args, dict) and isinstance(p.args.get("command"), str):
        parts.append(plain(f"  $ {p.args['command']}", "bold"))
    if isinstance(p.args, dict) and isinstance(p.args.get("description"), str):
        parts.append(plain(f"  the model says: {p.args['description']}", "italic"))
    diff = diff_for(p.tool, p.args)
    if diff is not None:
        parts.append(diff)
    parts.append(plain(f"why it asks: {p.reason}", "yellow"))
    keys = Text()
    keys.append("[y]", style="bold green")
    keys.append(" allow once   ")
    if p.always_rules:
        keys.append("[a]", style="bold green")
        keys.append(" allow always   ")
    keys.append("[n]", style="bold red")
    keys.append(" deny   ")
    keys.append("[r]", style="bold red")
    keys.append(" deny with a reason")
    parts.append(keys)
    if p.always_rules:
        parts.append(plain("  always stores: " + "; ".join(p.always_rules), "dim"))
    else:
        parts.append(Text("  no \"always\" for this call: policy asks every time "
                          "(a destructive pattern, or nothing safe to store)", style="dim"))
    if not armed:
        parts.append(Text("  (keys are ignored for half a second after the card appears)",
                          style="dim"))
    return Group(*parts)


class ApprovalCard(Vertical, can_focus=True):
    """Shows one :class:`PendingApproval`; answers it by key, then posts :class:`Answered`."""

    DEFAULT_CSS = """
    ApprovalCard { height: auto; max-height: 18; border: round $warning; padding: 0 1;
                   overflow-y: auto; }
    ApprovalCard:focus { border: round $accent; }
    ApprovalCard > Input { display: none; }
    ApprovalCard.reason > Input { display: block; }
    """

    class Answered(Message):
        def __init__(self, pending: PendingApproval, decision: str) -> None:
            super().__init__()
            self.pending = pending
            self.decision = decision

    def __init__(self, pending: PendingApproval, *, clock: Callable[[], float] = time.monotonic,
                 guard_s: float = GUARD_S) -> None:
        super().__init__()
        self.pending = pending
        self.clock = clock
        self.guard_s = guard_s
        self.shown_at = clock()
        self._body = Static(card_text(pending, armed=guard_s <= 0))
        self._reason = Input(placeholder="why not? (Enter sends it to the model, Esc goes back)")

    def compose(self) -> ComposeResult:
        yield self._body
        yield self._reason

    @property
    def armed(self) -> bool:
        return self.clock() - self.shown_at >= self.guard_s

    def on_mount(self) -> None:
        if self.guard_s > 0:
            self.set_timer(self.guard_s, lambda: self._body.update(card_text(self.pending, True)))

    def on_key(self, event: events.Key) -> None:
        if self.has_class("reason"):
            if event.key == "escape":
                event.stop()
                self.remove_class("reason")
                self.focus()
            return
        key = event.key
        if key not in ("y", "a", "n", "r"):
            return
        event.stop()
        if not self.armed:
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

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._answer("deny", reason=event.value.strip() or "denied by the user")

    def _answer(self, decision: str, *, always: bool = False, reason: str = "") -> None:
        self.pending.answer(decision, always=always, reason=reason)
        label = "allow always" if always else ("deny" if decision == "deny" else "allow once")
        self.post_message(self.Answered(self.pending, label + (f": {reason}" if reason and
                                                               decision == "deny" else "")))
