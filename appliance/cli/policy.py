"""``abhed policy explain TOOL ARGS_JSON``: the decision a call would get, and what made it.

Nothing is run: arguments are validated and normalized exactly as dispatch
would, configured extensions are asked for their ``tool_call`` verdict, and the
engine decides.  Prints a sentence, then the decision as JSON on the last line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from appliance._errors import AbhedError
from appliance.cli._common import config_option, get_config
from appliance.extensions import ExtensionHost
from appliance.policy import Gate, HookVerdict, PolicyEngine, normalize_args
from tools import Tool, ToolContext, ToolFailure, Workspace, native_tools


@click.group()
def policy() -> None:
    """Inspect the operator policy."""


@policy.command()
@click.argument("tool_name", metavar="TOOL")
@click.argument("args_json")
@click.option("--workspace", "-w", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path.cwd, show_default="current directory",
              help="Workspace the paths resolve beneath.")
@click.option("--mode", type=click.Choice(["plan", "ask", "auto"]), default=None,
              help="Explain under this mode instead of the configured one.")
@click.option("--no-extensions", is_flag=True, help="Leave configured extensions out.")
@config_option
def explain(tool_name: str, args_json: str, workspace: Path, mode: str | None, no_extensions: bool,
            config_path: Path | None) -> None:
    """Print the decision for TOOL called with ARGS_JSON, and the rule or extension that made it."""
    config = get_config(config_path)
    try:
        args = json.loads(args_json)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"ARGS_JSON is not valid JSON ({exc.msg} at column {exc.colno}); "
                               "quote it, e.g. '{\"command\": \"git status\"}'") from None
    settings = config.policy if mode is None else config.policy.model_copy(update={"mode": mode})
    engine = PolicyEngine(settings)
    tools: dict[str, Tool] = dict(native_tools())
    host = None if no_extensions or not config.extensions else ExtensionHost(config.extensions)
    try:
        if host is not None:
            try:
                tools.update(host.list_tools(tools))
            except AbhedError as exc:
                raise click.ClickException(str(exc)) from None
        tool = tools.get(tool_name)
        if tool is None:
            raise click.UsageError(f"unknown tool {tool_name!r}; tools: {', '.join(sorted(tools))}")
        ctx = ToolContext(workspace=Workspace(str(workspace), config.tools.secret_paths))
        try:
            norm = normalize_args(tool, args, ctx)
        except ToolFailure as exc:
            refused = {"verdict": "invalid", "decided_by": exc.code, "reason": exc.message}
            click.echo(f"refused before policy: {exc.message}")
            sys.stdout.write(json.dumps(refused) + "\n")
            return
        verdict = HookVerdict()
        if host is not None:
            verdict = host.tool_call("explain", tool.name, norm)
            if verdict.args is not None:
                norm = normalize_args(tool, verdict.args, ctx)
        decision = Gate._with_hook(engine.decide(tool, norm, ctx.workspace.root), verdict)
    finally:
        if host is not None:
            host.close("explain")
    click.echo(f"{decision.verdict} (by {decision.decided_by}): {decision.reason}")
    for rule in decision.always:
        click.echo(f"  'always allow' would store: {rule.describe()}")
    out: dict[str, Any] = {"verdict": decision.verdict, "decided_by": decision.decided_by,
           "reason": decision.reason, "commands": list(decision.commands), "args": norm,
           "always": [r.model_dump(exclude_defaults=True) for r in decision.always]}
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
