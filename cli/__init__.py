"""The ``abhed`` command.  Each verb lives in its own module and is imported
only when it is run, so ``abhed --help`` stays fast and heavy dependencies
(httpx, textual, vllm, pydantic models) load only for the verbs that need them.

``abhed --help`` lists every verb with a one-line summary.  Click would import
each verb's module to read that summary from its docstring, so the summary is
kept in :data:`COMMANDS` beside the import target instead; a test holds each
summary equal to the command's own ``short_help`` so the two cannot drift.

Exit codes: 0 done (a tool that ran and reported an error still counts as
done), 1 the command failed (e.g. a broken event chain), 2 usage error.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

__all__ = ["COMMANDS", "main"]

# Pydantic loads every installed distribution's `pydantic` entry point into each model's
# validation: code from any package on the host would see every setting, event and tool
# argument Abhed validates, a path no audit records.  Abhed uses no pydantic plugin, so
# its doors load none (an operator's explicit value is kept); it also spares each call
# the scan of installed distributions (26 M instructions of `abhed tool read`,
# docs/performance.md).  The sandbox's environment is allow-listed, so this does not
# reach the engineer's commands.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# verb -> ("module:attribute", the summary `abhed --help` shows).  Add a verb by
# adding one line here; tests/cli/test_startup.py checks the summary
# against the command and keeps heavy modules out of `abhed --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "acp": ("cli.acp:acp", "Serve the Agent Client Protocol on stdin/stdout, for an editor (docs/acp.md)."),
    "bundle": ("cli.bundle:bundle_group", "Build, sign, verify, inspect and carry offline bundles."),
    "catalog": ("cli.catalog:catalog", "Write model-catalog entries from the model-family presets."),
    "config": ("cli.config:config", "Show the effective settings and where each value comes from."),
    "doctor": ("cli.doctor:doctor",
               "Say what this installation is and what needs a fix (exit 0 well, 1 a fix, 2 could not look)."),
    "events": ("cli.events:events", "Verify, export, rotate, prune and repair the tamper-evident event log."),
    "mcp": ("cli.mcp:mcp", "Review MCP servers before their tools are offered to the model."),
    "model-front": ("cli.model_service:model_front",
                    "Serve the site's model requests: authenticate each host, record every request."),
    "model-relay": ("cli.model_service:model_relay",
                    "Relay enrolled engineers' model requests to the site's model service, naming each."),
    "policy": ("cli.policy:policy", "Inspect the operator policy."),
    "probe": ("cli.probe:probe", "Run the capability probe against a provider's model and say whether it may serve."),
    "rpc": ("cli.rpc:rpc", "Speak line-delimited JSON on stdin/stdout until EOF or shutdown."),
    "run": ("cli.run:run", "Work on PROMPT in a workspace until the model answers or a limit stops it."),
    "sandbox": ("cli.sandbox:sandbox", "The sandbox the agent's shell runs in."),
    "serve": ("cli.serve:serve", "Serve a catalog model with vLLM until interrupted."),
    "sessions": ("cli.sessions:sessions",
                 "List, show (the conversation), undo or redo sessions."),
    "tool": ("cli.tool:tool", "Run tool NAME with ARGS_JSON and print the result JSON as the last line."),
    "tui": ("cli.tui:tui", "Open the terminal UI on a workspace (bare `abhed` does the same in the current directory)."),
}


def load_command(name: str) -> click.Command | None:
    """Import and return the command for verb ``name`` (None when there is no such verb)."""
    entry = COMMANDS.get(name)
    if entry is None:
        return None
    module, _, attr = entry[0].partition(":")
    command = getattr(importlib.import_module(module), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{entry[0]} is not a click command")
    return command


def _shorten(text: str, limit: int) -> str:
    """Click's own truncation of a summary to ``limit`` characters, so help looks as before."""
    return click.Command(None, help=text).get_short_help_str(limit)


class LazyGroup(click.Group):
    """A group whose verbs are imported on use, and whose help imports none of them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name) or load_command(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, self.list_commands(ctx)), default=0)
        rows = [(name, _shorten(COMMANDS[name][1], limit)) for name in COMMANDS]
        rows += [(name, cmd.get_short_help_str(limit)) for name, cmd in self.commands.items()
                 if name not in COMMANDS and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))

    def invoke(self, ctx: click.Context) -> Any:
        # The one place a damaged or full event log met mid-command becomes a message:
        # every verb gets the same sentence, never a traceback.
        from appliance import EventLogError

        try:
            return super().invoke(ctx)
        except EventLogError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=LazyGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="abhed", prog_name="abhed")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Abhed: an offline coding agent for air-gapped sites.

    With no command, in a terminal, opens the TUI on the current directory.
    """
    if ctx.invoked_subcommand is not None:
        return
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        click.echo(ctx.get_help())  # no terminal to draw on: say what the verbs are
        return
    command = load_command("tui")
    assert command is not None
    ctx.invoke(command)
