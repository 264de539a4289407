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


def open_store(config: Config | None = None, *, for_work: bool = False) -> EventStore:
    """The event log, or one clear message: damaged, disk full, unopenable.

    ``for_work``: the door starts new work (run, rpc, tool), so it is also
    refused when the disk is below the reserve kept for the log.
    """
    try:
        store = EventStore(events_db_path(), settings=config.events if config else None)
        if for_work:
            try:
                store.check_reserve()
            except AbhedError:
                store.close()
                raise
        return store
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
