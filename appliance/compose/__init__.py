"""The composition: config and its layers, and every agent and tool session built from it.

Every door (``abhed run``, ``abhed tool``, ``abhed rpc``, the TUI, the probe)
and every subagent is assembled here, so a session has the same tools, the
same policy, the same extensions and the same sandbox whichever way it came
in.  The root package (``appliance``) keeps what all of this stands on: the
errors, ``ABHED_HOME``, the session and the dispatcher.

Public surface:

- :class:`Config` and :func:`load_config`: ``config.json``, strictly validated;
- :func:`choose_mode`: a door's requested mode bounded by the operator's, once;
- :func:`open_tooling` → :class:`Tooling` (tools, sandbox, extensions, MCP,
  policy and the dispatcher; :class:`Notice` for what set-up degraded);
- :func:`start_agent` → :class:`StartedAgent` (a whole agent; its subagents
  are built by :class:`Children`);
- :func:`choose_provider`, :func:`load_config_catalog`, :func:`open_store`.

Errors: :class:`appliance.ConfigError` (and the other ``AbhedError`` branches
the parts raise); a refused mode is ``appliance.policy.ModeRefused``.
"""

from appliance.compose._config import Config, load_config
from appliance.compose._start import (
    Children,
    StartedAgent,
    choose_provider,
    load_config_catalog,
    open_store,
    start_agent,
)
from appliance.compose._tooling import Notice, NoticeKind, Tooling, choose_mode, open_tooling

__all__ = [
    "Children",
    "Config",
    "Notice",
    "NoticeKind",
    "StartedAgent",
    "Tooling",
    "choose_mode",
    "choose_provider",
    "load_config",
    "load_config_catalog",
    "open_store",
    "open_tooling",
    "start_agent",
]
