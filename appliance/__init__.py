"""The agent runtime: config, sessions, the event log, and tool dispatch.

Errors: :class:`AbhedError` is the root (see ``appliance._errors``).
"""

from appliance._config import Config, load_config
from appliance._dispatch import Dispatcher
from appliance._errors import AbhedError, ChainBroken, ConfigError, EventLogError, SessionNotFound
from appliance._home import abhed_home, events_db_path
from appliance._session import Session

__all__ = [
    "AbhedError",
    "ChainBroken",
    "Config",
    "ConfigError",
    "Dispatcher",
    "EventLogError",
    "Session",
    "SessionNotFound",
    "abhed_home",
    "events_db_path",
    "load_config",
]
