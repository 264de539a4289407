"""``abhed tui`` (and bare ``abhed`` in a terminal): the Textual app (docs/tui.md).

The operator's policy binds it as it binds ``abhed run``: the agent is started
through the same ``start_agent`` call, so a mode the operator forbids is
refused the same way.  Problems found at start (no provider, a server that is
down, undeclared sampling, a broken config file) open the app on a screen that
says what to fix, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from appliance.cli._common import config_option


@click.command()
@click.option("--workspace", "-w", default=".", show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Workspace root the agent works beneath.")
@click.option("--session", "session_id", default=None, help="Continue this session.")
@click.option("--provider", "provider_name", default=None, help="Provider name from custom_providers.")
@click.option("--model", default=None, help="Served model name (default: the provider's).")
@click.option("--mode", type=click.Choice(["plan", "ask", "auto"]), default=None,
              help="Policy mode (default: the operator's policy.mode).")
@config_option
def tui(workspace: Path, session_id: str | None, provider_name: str | None, model: str | None,
        mode: str | None, config_path: Path | None) -> None:
    """Open the terminal UI on a workspace (bare `abhed` does the same in the current directory)."""
    from appliance import AbhedError, load_config
    from appliance.cli._common import open_store

    problem = ""
    config = None
    try:
        config = load_config(config_path)
    except AbhedError as exc:
        problem = str(exc)
    # The same door as run/rpc/tool: a damaged log or a disk below the reserve is one message.
    store = open_store(config, for_work=True)
    from tui import run_tui

    try:
        code = run_tui(config, store, workspace.resolve(), session_id=session_id,
                       provider=provider_name, model=model, mode=mode, problem=problem)
    finally:
        store.close()
    sys.exit(code)
