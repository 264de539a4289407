"""Small helpers shared by CLI verbs: the config and the event log, as usage errors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from appliance import AbhedError

if TYPE_CHECKING:  # the settings load when a verb runs, not for its --help
    from appliance.assembly import Config
    from appliance.events import EventStore

config_option = click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Your settings file instead of ABHED_HOME/config.json (it narrows the site's, if any).",
)


def get_config(path: Path | None,
               flags: Mapping[str, tuple[Any, str]] | None = None) -> Config:
    """The effective settings (the site's, narrowed by ``--config``'s file and ``flags``).

    A refusal (a broken site layer, a loosening, a bad file) is a usage error: exit 2,
    nothing started.
    """
    from appliance.assembly import load_config

    try:
        return load_config(path, flags)
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None


def open_store(config: Config | None = None, *, for_work: bool = False) -> EventStore:
    """The event log (:func:`appliance.assembly.open_store`), or one clear message."""
    from appliance.assembly import open_store as _open_store

    try:
        return _open_store(config, for_work=for_work)
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None


def interrupt_from_signal(interrupt: Callable[[str], None], reason: str) -> None:
    """Ask ``interrupt(reason)`` from a signal handler, on a thread of its own.

    The handler runs on the main thread between two of its steps, perhaps while that
    thread holds a lock the interrupt needs (the run's cancel token, its budget):
    called there, the interrupt could wait forever on its own thread."""
    threading.Thread(target=interrupt, args=(reason,), name="abhed-signal-interrupt",
                     daemon=True).start()
