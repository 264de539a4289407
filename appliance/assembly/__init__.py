"""What one tool call is assembled from: the effective settings and a tool session.

``abhed tool`` needs the settings (the site layer narrowed by the engineer's),
the tools, the sandbox, extensions, MCP servers, the policy gate and the
dispatcher, and nothing of an agent: no loop, no provider, no subagents.  That
much lives here; :mod:`appliance.compose` builds whole agents on top of it and
re-exports these names, so every door still has one assembly and each rule one
home.  Kept apart so a tool call imports no agent assembly: no `start_agent`,
provider reach or subagent spawner (tests/cli/test_startup.py).

Public surface:

- :class:`Config` (``config.json``'s schema, the site's too) and :func:`load_config`:
  the effective settings, the site layer (:func:`find_site`) narrowed by the
  engineer's (:func:`layer`, :data:`DIRECTIONS`; :func:`layers_of` says where
  each value came from); :func:`read_config` reads one file alone;
- :func:`choose_mode`: a door's requested mode bounded by the operator's, once;
  :func:`allowed_modes`: the modes a door may offer;
- :func:`open_tooling` → :class:`Tooling` (tools, sandbox, extensions, MCP,
  policy and the dispatcher; :class:`Notice` for what set-up degraded);
  :func:`artifact_store`: where a session's large outputs are kept;
- :class:`Limits` and :class:`TaskSettings`: the ``loop`` and ``tasks`` sections,
  here beside the schema so that reading settings imports no agent loop
  (:mod:`appliance.loop` re-exports them, and enforces them);
- :func:`open_store`: the event log, refused for new work below its disk reserve;
- :func:`to_say`: which start-up notices a door prints now (a note about the
  installation once per terminal session: :func:`first_in_terminal`).

Errors: :class:`appliance.ConfigError` (and the other ``AbhedError`` branches
the parts raise); a refused mode is ``appliance.policy.ModeRefused``.
"""

from appliance.assembly._config import ABSENT, Config, SiteSwitches, read_config
from appliance.assembly._event_log import open_store
from appliance.assembly._layers import (
    DIRECTIONS,
    Layered,
    LayerRule,
    Origin,
    Widening,
    WideningRefused,
    layer,
    layers_of,
    leaf_fields,
    load_config,
    rule_for,
)
from appliance.assembly._once import ONCE_KINDS, first_in_terminal, terminal_session, to_say
from appliance.assembly._run_settings import Limits, TaskSettings
from appliance.assembly._site_layer import HOST_SITE, SiteLayer, SiteOrigin, SiteRefused, find_site
from appliance.assembly._tooling import (
    Notice,
    NoticeKind,
    Tooling,
    allowed_modes,
    artifact_store,
    choose_mode,
    open_tooling,
)

__all__ = [
    "ABSENT",
    "DIRECTIONS",
    "HOST_SITE",
    "ONCE_KINDS",
    "Config",
    "Layered",
    "Limits",
    "LayerRule",
    "Notice",
    "NoticeKind",
    "Origin",
    "SiteLayer",
    "SiteOrigin",
    "SiteRefused",
    "SiteSwitches",
    "TaskSettings",
    "Tooling",
    "Widening",
    "WideningRefused",
    "allowed_modes",
    "artifact_store",
    "choose_mode",
    "find_site",
    "first_in_terminal",
    "layer",
    "layers_of",
    "leaf_fields",
    "load_config",
    "open_store",
    "open_tooling",
    "read_config",
    "rule_for",
    "terminal_session",
    "to_say",
]
