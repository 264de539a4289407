"""Asking a person: the loop's ``Approver`` seam, with what policy adds to a request.

The seam itself (:class:`appliance.loop.Approver`, ``ApprovalRequest``,
``Approval``) belongs to the agent loop; policy reuses it so that the TUI,
``abhed rpc`` and tests implement one interface.  Policy adds two things a
person must see: the bash commands that need the answer, and the scoped rules
an "always allow" answer would store (shown before they are stored).  A run
with no approver cannot ask, and then *ask means deny*, with a message saying
so.  An answer from the ``auto`` approver counts as nobody: by the time policy
asks, a rule, a destructive pattern or an extension wanted a person.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from appliance.loop._approver import Approval, ApprovalRequest
from appliance.policy._settings import Rule

__all__ = ["ScopedApproval", "ScopedApprovalRequest", "ScriptedApprover"]


@dataclass(frozen=True)
class ScopedApprovalRequest(ApprovalRequest):
    """The loop's request plus what policy knows.

    ``always_rules`` are the rules an "always allow" answer would store; empty
    means that answer is not offered (destructive commands ask every time).
    """

    decided_by: str = ""
    commands: tuple[str, ...] = ()
    always_rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class ScopedApproval(Approval):
    """An answer; ``always`` (with ``decision="allow"``) stores the request's ``always_rules``."""

    always: bool = False


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
