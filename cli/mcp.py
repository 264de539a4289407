"""``abhed mcp review NAME``: show a configured MCP server's tool list and the hash to pin."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from cli._common import config_option, get_config


@click.group()
def mcp() -> None:
    """Review MCP servers before their tools are offered to the model."""


@mcp.command()
@click.argument("name")
@config_option
def review(name: str, config_path: Path | None) -> None:
    """Start server NAME, print its tool list and the sha256 to pin as tools_sha256.

    Read every description and schema: they are instructions the model will
    follow.  The list shown is kept under ABHED_HOME/mcp/reviewed so a later
    change can be named exactly.
    """
    from appliance.mcp import McpGateway, reviewed_path, tools_sha256

    config = get_config(config_path)
    spec = next((s for s in config.mcp_servers if s.name == name), None)
    if spec is None:
        known = ", ".join(s.name for s in config.mcp_servers) or "none configured"
        raise click.UsageError(f"no MCP server named {name!r} in mcp_servers ({known})")
    with McpGateway([spec], verify=False) as gateway:
        if name in gateway.refused:
            raise click.ClickException(gateway.refused[name])
        canon = gateway.listed[name]
    digest = tools_sha256(canon)
    saved = reviewed_path(name, digest)
    saved.parent.mkdir(parents=True, exist_ok=True)
    tmp = saved.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(canon, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    tmp.replace(saved)
    click.echo(json.dumps(canon, indent=2, sort_keys=True, ensure_ascii=False))
    state = ("matches the pinned hash" if spec.tools_sha256 == digest else
             "is NOT the pinned hash" if spec.tools_sha256 else "is not pinned yet")
    click.echo(f"\n{len(canon)} tools; this list {state}. To offer these tools, set in "
               f"mcp_servers[{name}]:", err=True)
    click.echo(f'"tools_sha256": "{digest}"')
