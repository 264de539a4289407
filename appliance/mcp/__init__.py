"""The reviewed MCP gateway: stdio MCP servers pinned by the sha256 of their reviewed tool list.

See docs/mcp.md.  Errors: :class:`McpError` (under ``AbhedError``).
"""

from __future__ import annotations

from appliance.mcp._errors import McpError
from appliance.mcp._gateway import (
    McpGateway,
    canonical_tools,
    describe_changes,
    reviewed_path,
    tools_sha256,
)
from appliance.mcp._settings import McpServerSpec
from appliance.mcp._tools import McpTool

__all__ = [
    "McpError",
    "McpGateway",
    "McpServerSpec",
    "McpTool",
    "canonical_tools",
    "describe_changes",
    "reviewed_path",
    "tools_sha256",
]
