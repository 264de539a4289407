"""``abhed tool NAME ARGS_JSON``: one tool call through the agent's dispatch path."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import click

from appliance._dispatch import Dispatcher
from appliance._errors import AbhedError
from appliance._session import Session
from appliance.cli._common import config_option, get_config, open_store
from tools import ToolContext, Workspace, native_tools


@click.command()
@click.argument("name")
@click.argument("args_json")
@click.option("--workspace", "-w", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Workspace root the tool works beneath.")
@click.option("--session", "session_id", default=None,
              help="Continue this session (keeps read-before-edit across calls).")
@config_option
def tool(name: str, args_json: str, workspace: Path, session_id: str | None,
         config_path: Path | None) -> None:
    """Run tool NAME with ARGS_JSON and print the result JSON as the last line.

    Exit 0 whenever the tool ran (check "ok" in the result), 2 on a usage error.
    The session id goes to stderr; pass it to --session to continue.
    """
    config = get_config(config_path)
    tools = native_tools()
    if name not in tools:
        raise click.UsageError(f"unknown tool {name!r}; tools: {', '.join(sorted(tools))}")
    try:
        args = json.loads(args_json)
    except json.JSONDecodeError as exc:
        raise click.UsageError(
            f"ARGS_JSON is not valid JSON ({exc.msg} at column {exc.colno}); "
            "quote it, e.g. '{\"path\": \"/abs/file\"}'"
        ) from None
    except RecursionError:
        raise click.UsageError("ARGS_JSON is nested too deeply to parse; tool arguments are "
                               "a flat JSON object") from None
    ws = Workspace(str(workspace), config.tools.secret_paths)
    store = open_store()
    try:
        if session_id:
            session = Session.open(store, session_id, ws.root)
        else:
            session = Session.create(store, ws.root, version=version("abhed"),
                                     settings={"tools": config.tools.model_dump(mode="json")})
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"session: {session.id}", err=True)
    ctx = ToolContext(workspace=ws, settings=config.tools, ledger=session)
    if name == "bash":
        # Only bash needs the sandbox; it lives as long as this one call, so
        # a background job started here dies when the command returns.
        from appliance.sandbox import SandboxError, open_sandbox

        try:
            ctx.sandbox = open_sandbox(ws.root, config.sandbox)
        except SandboxError as exc:
            ctx.sandbox_problem = str(exc)
    try:
        result = Dispatcher(session, tools, ctx).call(name, args, source="cli")
    finally:
        if ctx.sandbox is not None:
            ctx.sandbox.close()
        store.close()
    sys.stdout.write(result.model_dump_json() + "\n")
