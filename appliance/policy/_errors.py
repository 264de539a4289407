"""The policy package's error root.

    AbhedError
    └── PolicyError          a policy object was built or used wrongly (a bug, not a model error)

A refused call is not an error: it is a ``ToolResult`` with ``ok=False`` that
tells the model what was refused and what to do instead.
"""

from __future__ import annotations

from appliance._errors import AbhedError

__all__ = ["PolicyError"]


class PolicyError(AbhedError):
    pass
