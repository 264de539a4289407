"""The agent loop: prompt assembly, the loop itself, limits.

Public surface: :class:`Agent` (and :class:`RunOutcome`), :class:`Limits` and
:class:`TaskSettings` (the settings' ``loop`` and ``tasks`` sections, defined beside
the settings' schema in :mod:`appliance.assembly` so that reading a config file
imports no loop; re-exported here, where they are enforced), the system prompt
builder and untrusted-content wrapping.  The loop has no policy of its own: modes,
rules and approvers live in :mod:`appliance.policy` (``Mode``, ``Approver``, ``HeadlessApprover``...);
a ready agent comes from :func:`appliance.compose.start_agent`.

Control flow is not an error: limits and interrupts end a run through
:class:`StopRun`, caught in one place; configuration problems raise
:class:`appliance.ConfigError` or :class:`models.ModelsError` before a run starts.
"""

from __future__ import annotations

from appliance.assembly import Limits, TaskSettings
from appliance.loop._agent import Agent, RunOutcome
from appliance.loop._budget import BUDGET_LIMIT_REACHED, Budget
from appliance.loop._limits import StopRun
from appliance.loop._prompt import (
    ABHED_MD,
    AGENTS_MD,
    BASE_PROMPT,
    SystemPrompt,
    build_system_prompt,
    tool_specs,
)
from appliance.loop._untrusted import escape_markers, wrap_result

__all__ = [
    "ABHED_MD",
    "AGENTS_MD",
    "BASE_PROMPT",
    "BUDGET_LIMIT_REACHED",
    "Agent",
    "Budget",
    "Limits",
    "RunOutcome",
    "StopRun",
    "SystemPrompt",
    "TaskSettings",
    "build_system_prompt",
    "escape_markers",
    "tool_specs",
    "wrap_result",
]
