"""The ``mcp_servers`` section of ``ABHED_HOME/config.json``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["McpServerSpec"]


class McpServerSpec(BaseModel):
    """One reviewed stdio MCP server, pinned by the hash of its reviewed tool list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,24}$",
                      description="Tools appear as mcp__NAME__TOOL.")
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Added to a minimal environment.")
    cwd: str | None = None
    tools_sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the reviewed tool list, from `abhed mcp review NAME`. Unset: the "
        "server is refused until reviewed.")
    timeout_ms: int = Field(default=30_000, ge=100, le=600_000,
                            description="Longest wait to start, list tools, or answer one call.")
