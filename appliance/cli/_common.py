"""Small helpers shared by CLI verbs: the config and the event log, as usage errors."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from appliance._errors import AbhedError

if TYPE_CHECKING:  # the composition loads when a verb runs, not for its --help
    from appliance.compose import Config
    from appliance.events import EventStore

config_option = click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Config file to use instead of ABHED_HOME/config.json.",
)


def get_config(path: Path | None) -> Config:
    from appliance.compose import load_config

    try:
        return load_config(path)
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None


def open_store(config: Config | None = None, *, for_work: bool = False) -> EventStore:
    """The event log (:func:`appliance.compose.open_store`), or one clear message."""
    from appliance.compose import open_store as _open_store

    try:
        return _open_store(config, for_work=for_work)
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
