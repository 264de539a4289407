"""The reviewed MCP gateway: stdio MCP servers pinned by the sha256 of their reviewed tool list.

See docs/mcp.md.  Errors: :class:`McpError` (under ``AbhedError``).

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:  # "X as X": an explicit re-export, so other packages type-check
    from appliance.mcp._errors import McpError as McpError
    from appliance.mcp._gateway import McpGateway as McpGateway
    from appliance.mcp._gateway import canonical_tools as canonical_tools
    from appliance.mcp._gateway import describe_changes as describe_changes
    from appliance.mcp._gateway import reviewed_path as reviewed_path
    from appliance.mcp._gateway import tools_sha256 as tools_sha256
    from appliance.mcp._settings import McpServerSpec as McpServerSpec
    from appliance.mcp._tools import McpTool as McpTool

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "canonical_tools": "appliance.mcp._gateway",
    "describe_changes": "appliance.mcp._gateway",
    "McpError": "appliance.mcp._errors",
    "McpGateway": "appliance.mcp._gateway",
    "McpServerSpec": "appliance.mcp._settings",
    "McpTool": "appliance.mcp._tools",
    "reviewed_path": "appliance.mcp._gateway",
    "tools_sha256": "appliance.mcp._gateway",
}

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

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
