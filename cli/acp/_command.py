"""``abhed acp``: the verb; the SDK and the runtime load only when it runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

__all__ = ["acp"]


@click.command()
@click.option("--provider", "provider_name", default=None,
              help="The provider sessions use (default: default_provider in config).")
@click.option("--model", default=None, help="The served model name sessions ask for.")
@click.option("--force-tool", default=None, metavar="NAME",
              help="Each prompt's first model turn must call this tool (as `abhed run --force-tool`).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Your settings file instead of ABHED_HOME/config.json (it narrows the site's, if any).")
def acp(provider_name: str | None, model: str | None, force_tool: str | None,
        config_path: Path | None) -> None:
    """Serve the Agent Client Protocol on stdin/stdout, for an editor (docs/acp.md)."""
    from appliance import AbhedError
    from appliance.compose import load_config, open_store

    try:
        config = load_config(config_path)
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        store = open_store(config, for_work=True)
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
    from cli.acp._serve import serve

    try:
        code = serve(config, store, provider=provider_name, model=model, force_tool=force_tool)
    finally:
        store.close()
    sys.exit(code)
