"""The ``abhed`` command.  Each verb lives in its own module and is imported
only when it is run, so ``abhed --help`` stays fast and heavy dependencies
(httpx, textual, vllm) load only for the verbs that need them.

Exit codes: 0 done (a tool that ran and reported an error still counts as
done), 1 the command failed (e.g. a broken event chain), 2 usage error.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

__all__ = ["main"]

# verb -> "module:attribute".  Add a verb by adding a line here.
COMMANDS: dict[str, str] = {
    "tool": "appliance.cli.tool:tool",
    "sessions": "appliance.cli.sessions:sessions",
    "events": "appliance.cli.events:events",
    "policy": "appliance.cli.policy:policy",
    "mcp": "appliance.cli.mcp:mcp",
    "sandbox": "appliance.cli.sandbox:sandbox",
    "bundle": "appliance.cli.bundle:bundle_group",
    "run": "appliance.cli.run:run",
    "rpc": "appliance.cli.rpc:rpc",
    "serve": "appliance.cli.serve:serve",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command: Any = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="abhed", prog_name="abhed")
def main() -> None:
    """Abhed: an offline coding agent for air-gapped sites."""
