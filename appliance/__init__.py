"""The agent runtime: config, sessions, the event log, tool dispatch, and assembly.

Every door (``abhed run``/``tool``/``rpc``, the TUI, subagents) builds its
session with :func:`start_agent` (a whole agent) or :func:`open_tooling`
(tools, policy and dispatcher only); see docs/architecture.md.

Errors: :class:`AbhedError` is the root (see ``appliance._errors``).

The names below are imported on first use (PEP 562 ``__getattr__``), not when
the package is: every ``abhed`` verb imports ``appliance`` first, and loading
the config models, the dispatcher and the policy engine here would put pydantic
and the whole runtime in front of ``abhed --help``.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:  # "X as X": an explicit re-export, so other packages type-check
    from appliance._assembly import Notice as Notice
    from appliance._assembly import StartedAgent as StartedAgent
    from appliance._assembly import Tooling as Tooling
    from appliance._assembly import choose_provider as choose_provider
    from appliance._assembly import load_config_catalog as load_config_catalog
    from appliance._assembly import open_tooling as open_tooling
    from appliance._assembly import start_agent as start_agent
    from appliance._config import Config as Config
    from appliance._config import load_config as load_config
    from appliance._dispatch import Dispatcher as Dispatcher
    from appliance._errors import AbhedError as AbhedError
    from appliance._errors import ChainBroken as ChainBroken
    from appliance._errors import ConfigError as ConfigError
    from appliance._errors import EventLogError as EventLogError
    from appliance._errors import SessionNotFound as SessionNotFound
    from appliance._home import abhed_home as abhed_home
    from appliance._home import events_db_path as events_db_path
    from appliance._session import Session as Session

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "abhed_home": "appliance._home",
    "AbhedError": "appliance._errors",
    "ChainBroken": "appliance._errors",
    "choose_provider": "appliance._assembly",
    "Config": "appliance._config",
    "ConfigError": "appliance._errors",
    "Dispatcher": "appliance._dispatch",
    "EventLogError": "appliance._errors",
    "events_db_path": "appliance._home",
    "load_config": "appliance._config",
    "load_config_catalog": "appliance._assembly",
    "Notice": "appliance._assembly",
    "open_tooling": "appliance._assembly",
    "Session": "appliance._session",
    "SessionNotFound": "appliance._errors",
    "start_agent": "appliance._assembly",
    "StartedAgent": "appliance._assembly",
    "Tooling": "appliance._assembly",
}

__all__ = [
    "AbhedError",
    "ChainBroken",
    "Config",
    "ConfigError",
    "Dispatcher",
    "EventLogError",
    "Notice",
    "Session",
    "SessionNotFound",
    "StartedAgent",
    "Tooling",
    "abhed_home",
    "choose_provider",
    "events_db_path",
    "load_config",
    "load_config_catalog",
    "open_tooling",
    "start_agent",
]

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
