"""The agent runtime: config, sessions, the event log, tool dispatch, and assembly.

Every door (``abhed run``/``tool``/``rpc``, the TUI, subagents) builds its
session with :func:`start_agent` (a whole agent) or :func:`open_tooling`
(tools, policy and dispatcher only); see docs/architecture.md.

Errors: :class:`AbhedError` is the root (see ``appliance._errors``).

This is the one package whose names load on first use (PEP 562): every
``abhed`` verb, ``abhed --help`` included, imports ``appliance`` first (the
command line is ``appliance.cli``), and importing the config models, the
dispatcher and the assembly here would put pydantic and the whole runtime in
front of a help screen that needs only click.  The subpackages and the other
packages import their names plainly: nothing on the help path imports them.
Each name is written twice: in the ``TYPE_CHECKING`` imports (what mypy and
readers see) and in ``_EXPORTS`` (what ``__getattr__`` loads);
``tests/appliance/cli/test_startup.py`` holds the two and ``__all__`` equal.
"""

from __future__ import annotations

import importlib
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

# the private module -> the public names it defines
_EXPORTS: dict[str, tuple[str, ...]] = {
    "appliance._assembly": ("Notice", "StartedAgent", "Tooling", "choose_provider",
                            "load_config_catalog", "open_tooling", "start_agent"),
    "appliance._config": ("Config", "load_config"),
    "appliance._dispatch": ("Dispatcher",),
    "appliance._errors": ("AbhedError", "ChainBroken", "ConfigError", "EventLogError",
                          "SessionNotFound"),
    "appliance._home": ("abhed_home", "events_db_path"),
    "appliance._session": ("Session",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

# A literal list: mypy takes the package's re-exports from it.
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


if not typing.TYPE_CHECKING:  # mypy sees the imports above; a __getattr__ would make every name Any

    def __getattr__(name: str) -> typing.Any:
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module 'appliance' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_MODULE_OF))
