"""Messages from the agent's threads to the app, and the sink that posts them.

Textual's ``post_message`` is thread-safe; deltas do not go through it (400
a second would flood the queue) but into a :class:`~tui._stream.DeltaBuffer`
that the render clock drains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message
from textual.message_pump import MessagePump

from tui._link import LinkInfo, PendingApproval
from tui._stream import DeltaBuffer

if TYPE_CHECKING:
    from appliance.events import StoredEvent
    from appliance.loop import RunOutcome
    from models import Delta

__all__ = ["AppSink", "ApprovalAsked", "EventArrived", "LinkFailed", "LinkPreparing", "LinkStarted",
           "LinkWaiting", "RunFinished"]


@dataclass
class EventArrived(Message):
    stored: StoredEvent


@dataclass
class ApprovalAsked(Message):
    pending: PendingApproval


@dataclass
class LinkStarted(Message):
    info: LinkInfo


@dataclass
class LinkPreparing(Message):
    provider: str
    model: str


@dataclass
class LinkWaiting(Message):
    text: str


@dataclass
class LinkFailed(Message):
    message: str


@dataclass
class RunFinished(Message):
    outcome: RunOutcome | None
    error: str | None


class AppSink:
    """The :class:`tui._link.Sink` of one app: every call becomes a message (or a buffered delta)."""

    def __init__(self, target: MessagePump, deltas: DeltaBuffer) -> None:
        self.target = target
        self.deltas = deltas

    def event(self, stored: StoredEvent) -> None:
        self.deltas.event_posted()
        self.target.post_message(EventArrived(stored))

    def delta(self, delta: Delta) -> None:
        self.deltas.put(delta)

    def approval(self, pending: PendingApproval) -> None:
        self.target.post_message(ApprovalAsked(pending))

    def progress(self, call_id: str, text: str) -> None:
        self.deltas.put_output(call_id, text)

    def preparing(self, provider: str, model: str) -> None:
        self.target.post_message(LinkPreparing(provider, model))

    def waiting(self, text: str) -> None:
        self.target.post_message(LinkWaiting(text))

    def started(self, info: LinkInfo) -> None:
        self.target.post_message(LinkStarted(info))

    def failed(self, message: str) -> None:
        self.target.post_message(LinkFailed(message))

    def run_ended(self, outcome: RunOutcome | None, error: str | None) -> None:
        self.target.post_message(RunFinished(outcome, error))
