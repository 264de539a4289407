"""Small helpers shared by CLI verbs."""

from __future__ import annotations

from pathlib import Path

import click

from appliance._config import Config, load_config
from appliance._errors import AbhedError
from appliance._home import events_db_path
from appliance.events import EventStore

config_option = click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Config file to use instead of ABHED_HOME/config.json.",
)


def get_config(path: Path | None) -> Config:
    try:
        return load_config(path)
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None


def open_store() -> EventStore:
    try:
        return EventStore(events_db_path())
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
