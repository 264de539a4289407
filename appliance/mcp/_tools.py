"""MCP tools as Abhed tools: namespaced, schema-checked, untrusted output, mutating unless read-only.

Each reviewed MCP tool becomes ``mcp__SERVER__TOOL`` and goes through the same
dispatch path as a built-in: policy, approval, events.  Its output comes from
outside the trust boundary; the loop wraps it (like every tool's output) in
one ``<untrusted>`` tag naming its source (``source = "mcp:SERVER"``), so it is
tagged once, in one place.  It needs the ``mcp`` capability, and it counts as
mutating unless its reviewed annotations say ``readOnlyHint: true``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from tools import SchemaTool, ToolContext, ToolResult, cap_text, failure

if TYPE_CHECKING:
    from appliance.mcp._gateway import McpGateway

__all__ = ["McpTool", "make_mcp_tool"]

class McpTool(SchemaTool):
    """Base of the classes made per MCP tool."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"mcp"})
    server: ClassVar[str] = ""
    remote_name: ClassVar[str] = ""
    gateway: ClassVar[McpGateway | None] = None
    timeout_s: ClassVar[float] = 30.0

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        assert self.gateway is not None
        values = self.checked_values(args)
        source = f"mcp:{self.server}/{self.remote_name}"
        try:
            res = self.gateway.call(self.server, self.remote_name, values, self.timeout_s)
        except TimeoutError:
            return failure("mcp_timeout", f"{self.name} did not answer within {self.timeout_s:g} s. "
                           "It may still be working; check before calling it again.", retryable=True)
        except Exception as exc:
            return failure("mcp_unavailable", f"{self.name} could not be called ({type(exc).__name__}: "
                           f"{str(exc)[:200]}). Try once more; if it fails again, do without it.",
                           retryable=True)
        parts: list[str] = []
        for item in res.content:
            text = getattr(item, "text", None)
            parts.append(text if isinstance(text, str) else f"[{item.type} content omitted]")
        content, truncated = cap_text("\n".join(parts))
        if res.is_error:
            return failure("mcp_tool_error", f"{self.name} reported an error:\n{content}")
        return ToolResult(ok=True, content=content, truncated=truncated,
                          details={"source": source})


def make_mcp_tool(gateway: McpGateway, server: str, entry: dict[str, Any], remote: str) -> McpTool:
    spec = next(s for s in gateway.specs if s.name == server)
    annotations = entry.get("annotations") or {}
    schema = entry.get("inputSchema")
    name = f"mcp__{server}__{remote}"[:64]
    cls = type(f"Mcp_{server}_{remote}", (McpTool,), {
        "name": name,
        "description": str(entry.get("description") or remote)[:4000],
        "schema": schema if isinstance(schema, dict) else {"type": "object"},
        "mutates": annotations.get("readOnlyHint") is not True,
        "server": server,
        "source": f"mcp:{server}",
        "remote_name": remote,
        "gateway": gateway,
        "timeout_s": spec.timeout_ms / 1000,
    })
    tool = cls()
    assert isinstance(tool, McpTool)
    return tool
