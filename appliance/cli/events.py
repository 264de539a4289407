"""``abhed events verify|head``: check the log's hash chain."""

from __future__ import annotations

import sys

import click

from appliance._errors import ChainBroken
from appliance.cli._common import open_store


@click.group()
def events() -> None:
    """Inspect the tamper-evident event log."""


@events.command()
def verify() -> None:
    """Re-hash every event; exit 0 if the chain is intact, 1 naming the first bad event."""
    store = open_store()
    try:
        count, head = store.verify()
    except ChainBroken as exc:
        click.echo(f"BROKEN at event {exc.seq}: {exc.reason}", err=True)
        sys.exit(1)
    click.echo(f"ok: {count} events, chain intact, head {head}")


@events.command()
def head() -> None:
    """Print the count and head hash; note it down to detect a log cut short later."""
    store = open_store()
    count, digest = store.head()
    click.echo(f"{count} {digest}")
