"""``abhed rpc``: serve the JSON-lines protocol on stdin/stdout (docs/rpc.md)."""

from __future__ import annotations

import io
import signal
import sys
from pathlib import Path

import click

from cli._common import config_option, get_config, interrupt_from_signal, open_store
from cli.rpc._server import RpcServer


@click.command()
@click.option("--workspace", "-w", default=None,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Default workspace for start (start may name its own).")
@click.option("--provider", "provider_name", default=None, help="Default provider for start.")
@click.option("--model", default=None, help="Default served model name for start.")
@config_option
def rpc(workspace: Path | None, provider_name: str | None, model: str | None,
        config_path: Path | None) -> None:
    """Speak line-delimited JSON on stdin/stdout until EOF or shutdown."""
    config = get_config(config_path)
    store = open_store(config, for_work=True)
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace", newline="\n",
                           line_buffering=False, write_through=True)
    server = RpcServer(config, store, sys.stdin.buffer, out, workspace=workspace,
                       provider=provider_name, model=model,
                       log=lambda s: click.echo(s, err=True))
    # Ctrl-C aborts the running run, as the abort request does; EOF ends the process.
    signal.signal(signal.SIGINT, lambda s, f: interrupt_from_signal(server.agent.interrupt, "Ctrl-C")
                  if server.agent else None)
    try:
        code = server.serve()
    finally:
        store.close()
    sys.exit(code)
