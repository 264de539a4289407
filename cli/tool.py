"""``abhed tool NAME ARGS_JSON``: one tool call through the agent's dispatch path."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import click

from appliance import AbhedError, Session
from appliance.assembly import choose_mode, layers_of, open_tooling, to_say
from appliance.policy import MODES, Approval, ApprovalRequest, ModeRefused
from cli._common import config_option, get_config, open_store
from tools import Workspace, native_tools

_DOOR = "abhed tool --mode"


class _CommandLineApprover:
    """The person who typed the command answers "ask": ``--yes`` approves, else it is declined."""

    def __init__(self, yes: bool) -> None:
        self.yes = yes

    def approve(self, request: ApprovalRequest) -> Approval:
        if self.yes:
            return Approval("allow", "cli --yes", "approved on the command line with --yes")
        # Words for the person at the command line, not the gate's words for a model: they
        # declined nothing, they left out the flag that approves.
        return Approval("deny", "cli", "not approved: abhed tool ran without --yes",
                        declined_text=(
                            f"Not run: policy asks before this {request.tool} call "
                            f"({request.reason}), and `abhed tool` approves only with --yes. "
                            "Run the same command again with --yes added to approve it "
                            "(deny rules still win)."))


@click.command()
@click.argument("name")
@click.argument("args_json")
@click.option("--workspace", "-w", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Workspace root the tool works beneath.")
@click.option("--session", "session_id", default=None,
              help="Continue this session (keeps read-before-edit across calls).")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="Policy mode for this call (default: policy.mode from config, which is also "
                   "the ceiling: only a stricter mode is accepted).")
@click.option("--yes", "-y", is_flag=True,
              help="Approve the call if policy asks (deny rules still win).")
@config_option
def tool(name: str, args_json: str, workspace: Path, session_id: str | None, mode: str | None,
         yes: bool, config_path: Path | None) -> None:
    """Run tool NAME with ARGS_JSON and print the result JSON as the last line.

    The call goes through the same path as the agent's: validation, path
    rules, policy (deny/ask/allow rules, destructive patterns, extensions),
    events.  When policy asks, --yes approves; without it the call is declined.
    Exit 0 whenever the tool ran or was refused (check "ok"), 2 on a usage
    error.  The session id goes to stderr; pass it to --session to continue.
    """
    config = get_config(config_path)
    known = set(native_tools())
    if name not in known and not (config.extensions or config.mcp_servers):
        raise click.UsageError(f"unknown tool {name!r}; tools: {', '.join(sorted(known))}")
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
    try:  # refuse a looser mode before a session is even created
        choice = choose_mode(config, mode, door=_DOOR)
    except ModeRefused as exc:
        raise click.UsageError(str(exc)) from None
    ws = Workspace(str(workspace), config.tools.secret_paths)
    store = open_store(config, for_work=True)
    try:
        if session_id:
            session = Session.open(store, session_id, ws.root)
        else:
            session = Session.create(store, ws.root, version=version("abhed"),
                                     settings={"tools": config.tools.model_dump(mode="json"),
                                               "door": "abhed tool", **layers_of(config).record()})
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"session: {session.id}", err=True)
    try:
        tooling = open_tooling(config, session, ws, mode=choice,
                               approver=_CommandLineApprover(yes), sandbox=name == "bash")
    except AbhedError as exc:
        store.close()
        raise click.ClickException(str(exc)) from None
    for notice in to_say(tooling.notices):  # a note about the installation: once per terminal
        click.echo(notice.line(), err=True)
    try:
        if name not in tooling.tools:
            raise click.UsageError(
                f"unknown tool {name!r}; tools: {', '.join(sorted(tooling.tools))}")
        result = tooling.dispatcher.call(name, args, source="cli")
    finally:
        tooling.close()
        store.close()
    # What the caller reads is redacted like the record (events.redact, an extension's rewrite).
    if store.redactor:
        result = type(result).model_validate(store.redactor.value(result.model_dump(mode="json")))
    sys.stdout.write(result.model_dump_json() + "\n")
