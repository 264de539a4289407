"""Asking a person: the ``Approver`` seam, and what policy puts in a request.

Policy decides *whether* a call must be asked about; an approver only
answers.  The TUI prompts a person, ``abhed rpc`` sends an approval request
to its caller, ``abhed tool --yes`` answers for the person who typed it.  A
request carries what a person must see: the bash commands that need the
answer, and the scoped rules an "always allow" answer would store (shown
before they are stored).

"Nobody can answer" is a type, :class:`HeadlessApprover`, not a string the
gate matches: a run with it (or with no approver) never reaches a person, and
there *ask means deny*, with a message saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from appliance.policy._settings import Rule

__all__ = [
    "Approval",
    "ApprovalRequest",
    "Approver",
    "CallbackApprover",
    "HeadlessApprover",
    "ScopedApproval",
    "ScopedApprovalRequest",
    "ScriptedApprover",
]


@dataclass(frozen=True)
class ApprovalRequest:
    """One call that needs an answer, with its normalized arguments."""

    call_id: str
    tool: str
    args: Any
    reason: str


@dataclass(frozen=True)
class ScopedApprovalRequest(ApprovalRequest):
    """A request plus what policy knows.

    ``always_rules`` are the rules an "always allow" answer would store; empty
    means that answer is not offered (destructive commands ask every time).
    ``args["command"]`` of a bash call is the command exactly as it will run;
    ``commands`` are what policy's parse found in it that needs the answer.
    """

    decided_by: str = ""
    commands: tuple[str, ...] = ()
    always_rules: tuple[Rule, ...] = ()
    #: The session whose agent asks (a subagent's own session when a subagent asks).
    session_id: str = ""
    #: For a file change: the unified diff against what is on disk, computed before asking.
    preview: str = ""


@dataclass(frozen=True)
class Approval:
    """An answer and who gave it (recorded in the ``approval`` event)."""

    decision: Literal["allow", "deny"]
    decided_by: str
    reason: str = ""
    #: A declined call's result text for a door whose reader is a person, not a model
    #: (``abhed tool`` without ``--yes``: nobody declined anything, a flag was missing).
    #: Empty: the gate's words for the model ("The user declined ...").
    declined_text: str = ""


@dataclass(frozen=True)
class ScopedApproval(Approval):
    """An answer; ``always`` (with ``decision="allow"``) stores the request's ``always_rules``."""

    always: bool = False


class Approver(Protocol):
    def approve(self, request: ApprovalRequest) -> Approval: ...


class HeadlessApprover:
    """Nobody can answer (``abhed run``, a subagent without a person): ask means deny.

    The gate recognises this type and never calls :meth:`approve`; it is here
    so the object still satisfies :class:`Approver` wherever one is expected.
    """

    def approve(self, request: ApprovalRequest) -> Approval:
        return Approval("deny", "headless",
                        f"{request.tool} needs approval ({request.reason}) and nobody can answer "
                        "in this run; it was not run.")


class CallbackApprover:
    """Asks a function (the rpc server's request/answer round trip, a TUI dialog, a test)."""

    def __init__(self, fn: Callable[[ApprovalRequest], Approval]) -> None:
        self.fn = fn

    def approve(self, request: ApprovalRequest) -> Approval:
        return self.fn(request)


@dataclass
class ScriptedApprover:
    """A deterministic approver for tests: gives ``answers`` in order, then ``then``."""

    answers: Iterable[Approval] = ()
    then: Approval = field(default_factory=lambda: Approval("deny", "scripted", "scripted deny"))
    requests: list[ApprovalRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue = list(self.answers)

    def approve(self, request: ApprovalRequest) -> Approval:
        self.requests.append(request)
        return self._queue.pop(0) if self._queue else self.then
