"""The agent runtime: what every part stands on (errors, ABHED_HOME, the session, dispatch).

Sessions are assembled in :mod:`appliance.compose` (config, ``start_agent``,
``open_tooling``): every door and every subagent goes through it; see
docs/architecture.md.  What a single tool call needs of that (settings, the
tool session, the event log) is :mod:`appliance.assembly`, which compose
builds on, so ``abhed tool`` imports no agent.  The doors themselves (the ``abhed`` command, rpc) stand
above this package, in :mod:`cli`.

Errors: :class:`AbhedError` is the root (see ``appliance._errors``).
"""

from __future__ import annotations

from appliance._dispatch import Dispatcher
from appliance._errors import (
    AbhedError,
    ChainBroken,
    ConfigError,
    EventLogError,
    SessionBusy,
    SessionNotFound,
)
from appliance._home import abhed_home, events_db_path
from appliance._session import Session

__all__ = [
    "AbhedError",
    "ChainBroken",
    "ConfigError",
    "Dispatcher",
    "EventLogError",
    "Session",
    "SessionBusy",
    "SessionNotFound",
    "abhed_home",
    "events_db_path",
]
