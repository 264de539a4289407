"""``abhed tui`` (and bare ``abhed`` in a terminal): the Textual app (docs/tui.md).

The operator's policy binds it as it binds ``abhed run``: the agent is started
through the same ``start_agent`` call, so a mode the operator forbids is
refused the same way.  Problems found at start (no provider, a server that is
down, undeclared sampling, a broken config file) open the app on a screen that
says what to fix, never a traceback.

The config and the event log are opened on the app's start thread, after its
first frame: this module imports neither (nor ``cli._common``, which
would load the config models), so the first frame waits only for Textual.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command()
@click.option("--workspace", "-w", default=".", show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Workspace root the agent works beneath.")
@click.option("--session", "session_id", default=None, help="Continue this session.")
@click.option("--provider", "provider_name", default=None, help="Provider name from custom_providers.")
@click.option("--model", default=None, help="Served model name (default: the provider's).")
# The TUI's own copy of the mode list (tui._link.MODES, held equal to appliance.policy.MODES
# by tests/tui/test_app.py): this verb is bare `abhed`, and importing the policy package
# here would put the whole runtime in front of the first frame.
@click.option("--mode", type=click.Choice(["plan", "ask", "auto"]), default=None,
              help="Policy mode (default: the operator's policy.mode).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Config file to use instead of ABHED_HOME/config.json.")
def tui(workspace: Path, session_id: str | None, provider_name: str | None, model: str | None,
        mode: str | None, config_path: Path | None) -> None:
    """Open the terminal UI on a workspace (bare `abhed` does the same in the current directory)."""
    from tui import run_tui

    sys.exit(run_tui(None, None, workspace.resolve(), session_id=session_id,
                     provider=provider_name, model=model, mode=mode, config_path=config_path))
