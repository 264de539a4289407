"""The composition: config and its layers, and every agent and tool session built from it.

Every door (``abhed run``, ``abhed tool``, ``abhed rpc``, the TUI, the probe)
and every subagent is assembled here, so a session has the same tools, the
same policy, the same extensions and the same sandbox whichever way it came
in.  The root package (``appliance``) keeps what all of this stands on: the
errors, ``ABHED_HOME``, the session and the dispatcher.  What one tool call
needs (settings, site layer, tools, policy, the event log) is assembled in
:mod:`appliance.assembly`, which this package builds on and re-exports, so
``abhed tool`` imports no agent, provider or subagent.

Public surface: the names of :mod:`appliance.assembly` (the settings and their
layers, the mode a door may run in, a tool session, the event log, start-up notices;
its docstring lists them, and its errors), all but its ``ABSENT`` and
``artifact_store``; and, of this package's own:

- :func:`start_agent` → :class:`StartedAgent` (a whole agent; its subagents
  are built by :class:`Children`);
- :func:`choose_provider`, :func:`load_config_catalog`;
- :func:`reach_provider`: a provider marked ``start_on_demand`` started if need be
  (:func:`local_service`, :func:`keeper_command`); :func:`open_reached`: that, then the
  provider opened, with the one call that closes it and releases the service.
"""

from appliance.assembly import (
    DIRECTIONS,
    HOST_SITE,
    ONCE_KINDS,
    Config,
    Layered,
    LayerRule,
    Notice,
    NoticeKind,
    Origin,
    SiteLayer,
    SiteOrigin,
    SiteRefused,
    SiteSwitches,
    Tooling,
    Widening,
    WideningRefused,
    allowed_modes,
    choose_mode,
    find_site,
    first_in_terminal,
    layer,
    layers_of,
    leaf_fields,
    load_config,
    open_store,
    open_tooling,
    read_config,
    rule_for,
    terminal_session,
    to_say,
)
from appliance.compose._local_model import (
    keeper_command,
    local_service,
    open_reached,
    reach_provider,
)
from appliance.compose._start import (
    Children,
    StartedAgent,
    choose_provider,
    load_config_catalog,
    start_agent,
)

__all__ = [
    "DIRECTIONS",
    "HOST_SITE",
    "ONCE_KINDS",
    "Children",
    "Config",
    "Layered",
    "Origin",
    "LayerRule",
    "SiteLayer",
    "SiteOrigin",
    "SiteRefused",
    "SiteSwitches",
    "Widening",
    "WideningRefused",
    "Notice",
    "NoticeKind",
    "StartedAgent",
    "Tooling",
    "allowed_modes",
    "choose_mode",
    "first_in_terminal",
    "keeper_command",
    "local_service",
    "choose_provider",
    "find_site",
    "layer",
    "layers_of",
    "leaf_fields",
    "load_config",
    "load_config_catalog",
    "open_store",
    "open_tooling",
    "open_reached",
    "reach_provider",
    "terminal_session",
    "to_say",
    "read_config",
    "rule_for",
    "start_agent",
]
