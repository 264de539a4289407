"""The policy package's error root.

    AbhedError
    └── PolicyError          policy refused to set up a run as asked
        └── ModeRefused      a caller asked for a mode the operator's config does not allow

A refused *call* is not an error: it is a ``ToolResult`` with ``ok=False`` that
tells the model what was refused and what to do instead.
"""

from __future__ import annotations

from appliance._errors import AbhedError

__all__ = ["ModeRefused", "PolicyError"]


class PolicyError(AbhedError):
    """Policy refused to start something as asked (never raised for a single tool call)."""


class ModeRefused(PolicyError):
    """A door asked for a mode looser than the operator's ``policy.mode`` (or not a mode)."""
