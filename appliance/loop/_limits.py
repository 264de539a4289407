"""The small control-flow signal that ends a run when a limit is reached.

A limit is not an error: reaching ``max_turns`` is a normal way for a run to
end, so it is a :class:`StopRun` carrying its reason, raised where it is
noticed and caught in exactly one place in the loop (as mini-swe-agent does).
The limits themselves (:class:`appliance.assembly.Limits`, config section
``loop``) are settings, so they live beside the settings' schema.
"""

from __future__ import annotations

from appliance.events import RunEndReason

__all__ = ["StopRun"]


class StopRun(Exception):
    """Ends a run: caught once in the loop, turned into a ``run_ended`` event."""

    def __init__(self, reason: RunEndReason, message: str, *, retries: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.reason: RunEndReason = reason
        self.message = message
        self.retries = retries  # the failed request's retried attempts, for run_ended
