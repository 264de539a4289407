"""``abhed sandbox check``: which sandbox backends work on this host, and how fast."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli._common import config_option, get_config


@click.group()
def sandbox() -> None:
    """The sandbox the agent's shell runs in."""


@sandbox.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--no-boot", is_flag=True, help="Check the microVM image and tools without booting.")
@config_option
def check(as_json: bool, no_boot: bool, config_path: Path | None) -> None:
    """Report which backends work here and why the others do not; time a boot and a command.

    Exit 0 when the configured backend (or, for "auto", at least one of microvm and bwrap)
    works, 1 otherwise.
    """
    from appliance.sandbox import check_backends

    config = get_config(config_path)
    reports = check_backends(config.sandbox, boot=not no_boot)
    chosen = config.sandbox.backend
    working = {r.backend for r in reports if r.ok}
    usable = (bool(working & {"microvm", "bwrap"}) if chosen == "auto" else chosen in working)
    if as_json:
        click.echo(json.dumps({"configured": chosen, "usable": usable,
                               "backends": [r.as_dict() for r in reports]}))
    else:
        click.echo(f"configured backend: {chosen}")
        for r in reports:
            mark = "ok  " if r.ok else "FAIL"
            timing = []
            if r.boot_ms is not None:
                timing.append(f"start {r.boot_ms:.0f} ms")
            if r.command_ms is not None:
                timing.append(f"command {r.command_ms:.0f} ms")
            extra = f" ({', '.join(timing)})" if timing else ""
            click.echo(f"  {mark} {r.backend:8} {r.reason}{extra}")
    if not usable:
        raise SystemExit(1)
