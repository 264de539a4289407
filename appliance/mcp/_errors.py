"""The MCP package's error root.

    AbhedError
    └── McpError        a server could not be started, listed or verified (its message says why)

A refused server does not stop the others: the gateway keeps the message in
``McpGateway.refused``.  A failing tool call is a result, not an error.
"""

from __future__ import annotations

from appliance._errors import AbhedError

__all__ = ["McpError"]


class McpError(AbhedError):
    pass
