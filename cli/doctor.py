"""``abhed doctor``: what this installation is, and each problem with its fix.

Exit 0 when all is well, 1 when something needs a fix, 2 when a check could not
look.  The findings are :func:`appliance.doctor.examine`'s (the TUI's ``/doctor``
shows the same).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli._common import config_option


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of lines.")
@config_option
def doctor(as_json: bool, config_path: Path | None) -> None:
    """Say what this installation is and what needs a fix (exit 0 well, 1 a fix, 2 could not look)."""
    from appliance.doctor import examine

    report = examine(config_path)
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
    else:
        for line in report.lines():
            click.echo(line)
    raise SystemExit(report.exit_code)
