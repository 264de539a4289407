"""Who answers when a call needs approval: the ``Approver`` seam.

The policy engine (its own issue) decides *whether* a call must be asked
about; an approver only answers.  The TUI prompts a person, ``abhed rpc`` sends
an approval request to its caller, and headless runs have nobody to ask, so
ask means deny there, with a message that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "MODES",
    "Approval",
    "ApprovalRequest",
    "Approver",
    "AutoApprover",
    "CallbackApprover",
    "HeadlessApprover",
]

MODES = ("auto", "ask", "plan")
"""auto: allowed calls run (destructive ones still ask).  ask: every mutation asks.
plan: read-only tools only.  The policy engine (appliance.policy) applies them."""


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: str
    args: Any
    reason: str


@dataclass(frozen=True)
class Approval:
    decision: Literal["allow", "deny"]
    decided_by: str
    reason: str = ""


class Approver(Protocol):
    def approve(self, request: ApprovalRequest) -> Approval: ...


class AutoApprover:
    """Allows every call it is asked about (mode ``auto``; destructive calls never reach it)."""

    def approve(self, request: ApprovalRequest) -> Approval:
        return Approval("allow", "auto", "auto mode")


class HeadlessApprover:
    """Nobody can answer: ask means deny."""

    def approve(self, request: ApprovalRequest) -> Approval:
        return Approval("deny", "headless",
                        f"{request.tool} needs approval ({request.reason}) and this run is headless, "
                        "so nobody can approve it; it was not run. Run in auto mode, or use the TUI or "
                        "`abhed rpc` to answer approvals.")


class CallbackApprover:
    """Asks a function (the rpc server's request/answer round trip, a TUI dialog, a test)."""

    def __init__(self, fn: Callable[[ApprovalRequest], Approval]) -> None:
        self.fn = fn

    def approve(self, request: ApprovalRequest) -> Approval:
        return self.fn(request)
