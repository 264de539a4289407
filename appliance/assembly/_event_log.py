"""The event log a door opens, under the config's event-log settings."""

from __future__ import annotations

from appliance._errors import AbhedError
from appliance._home import events_db_path
from appliance.assembly._config import Config
from appliance.events import EventStore

__all__ = ["open_store"]


def open_store(config: Config | None = None, *, for_work: bool = False) -> EventStore:
    """The event log under the config's event-log settings (redaction, reserve, rotation, witness).

    ``config`` None: a door that only reads the log (``abhed sessions``).
    ``for_work``: the door starts new work (run, rpc, tool, the TUI), so it is
    also refused when the disk is below the reserve kept for the log.

    Raises:
        EventLogError: damaged, full, or cannot be opened; the message says what to do.
    """
    store = EventStore(events_db_path(), settings=config.events if config is not None else None)
    if for_work:
        try:
            store.check_reserve()
        except AbhedError:
            store.close()
            raise
    return store
