"""Small helpers shared by CLI verbs: the config and the event log, as usage errors."""

from __future__ import annotations

from pathlib import Path

import click

from appliance._errors import AbhedError
from appliance.compose import Config, load_config
from appliance.compose import open_store as _open_store
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


def open_store(config: Config | None = None, *, for_work: bool = False) -> EventStore:
    """The event log (:func:`appliance.compose.open_store`), or one clear message."""
    try:
        return _open_store(config, for_work=for_work)
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
