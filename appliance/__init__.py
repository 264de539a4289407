"""The agent runtime: what every part stands on (errors, ABHED_HOME, the session, dispatch).

Sessions are assembled in :mod:`appliance.compose` (config, ``start_agent``,
``open_tooling``): every door and every subagent goes through it; see
docs/architecture.md.

Errors: :class:`AbhedError` is the root (see ``appliance._errors``).

This is the one package whose names load on first use (PEP 562): every
``abhed`` verb, ``abhed --help`` included, imports ``appliance`` first (the
command line is ``appliance.cli``), and importing the dispatcher and the
session here would put pydantic and the tools in front of a help screen that
needs only click.  The subpackages and the other
packages import their names plainly: nothing on the help path imports them.
Each name is written twice: in the ``TYPE_CHECKING`` imports (what mypy and
readers see) and in ``_EXPORTS`` (what ``__getattr__`` loads);
``tests/appliance/cli/test_startup.py`` holds the two and ``__all__`` equal.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:  # "X as X": an explicit re-export, so other packages type-check
    from appliance._dispatch import Dispatcher as Dispatcher
    from appliance._errors import AbhedError as AbhedError
    from appliance._errors import ChainBroken as ChainBroken
    from appliance._errors import ConfigError as ConfigError
    from appliance._errors import EventLogError as EventLogError
    from appliance._errors import SessionBusy as SessionBusy
    from appliance._errors import SessionNotFound as SessionNotFound
    from appliance._home import abhed_home as abhed_home
    from appliance._home import events_db_path as events_db_path
    from appliance._session import Session as Session

# the private module -> the public names it defines
_EXPORTS: dict[str, tuple[str, ...]] = {
    "appliance._dispatch": ("Dispatcher",),
    "appliance._errors": ("AbhedError", "ChainBroken", "ConfigError", "EventLogError",
                          "SessionBusy", "SessionNotFound"),
    "appliance._home": ("abhed_home", "events_db_path"),
    "appliance._session": ("Session",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

# A literal list: mypy takes the package's re-exports from it.
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
