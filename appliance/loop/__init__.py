"""The agent loop: prompt assembly, the loop itself, limits.

Public surface: :class:`Agent` (and :class:`RunOutcome`), :class:`Limits`,
:class:`ObservedSession`, the system prompt builder and untrusted-content
wrapping.  The loop has no policy of its own: modes, rules and approvers live
in :mod:`appliance.policy` (``Mode``, ``Approver``, ``HeadlessApprover``...);
a ready agent comes from :func:`appliance.start_agent`.

Control flow is not an error: limits and interrupts end a run through
:class:`StopRun`, caught in one place; configuration problems raise
:class:`appliance.ConfigError` or :class:`models.ModelsError` before a run starts.

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:  # "X as X": an explicit re-export, so other packages type-check
    from appliance.loop._agent import Agent as Agent
    from appliance.loop._agent import RunOutcome as RunOutcome
    from appliance.loop._budget import BUDGET_LIMIT_REACHED as BUDGET_LIMIT_REACHED
    from appliance.loop._budget import Budget as Budget
    from appliance.loop._limits import Limits as Limits
    from appliance.loop._limits import StopRun as StopRun
    from appliance.loop._limits import TaskSettings as TaskSettings
    from appliance.loop._observed import ObservedSession as ObservedSession
    from appliance.loop._prompt import ABHED_MD as ABHED_MD
    from appliance.loop._prompt import AGENTS_MD as AGENTS_MD
    from appliance.loop._prompt import BASE_PROMPT as BASE_PROMPT
    from appliance.loop._prompt import SystemPrompt as SystemPrompt
    from appliance.loop._prompt import build_system_prompt as build_system_prompt
    from appliance.loop._prompt import tool_specs as tool_specs
    from appliance.loop._untrusted import escape_markers as escape_markers
    from appliance.loop._untrusted import wrap_result as wrap_result

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "ABHED_MD": "appliance.loop._prompt",
    "Agent": "appliance.loop._agent",
    "AGENTS_MD": "appliance.loop._prompt",
    "BASE_PROMPT": "appliance.loop._prompt",
    "Budget": "appliance.loop._budget",
    "BUDGET_LIMIT_REACHED": "appliance.loop._budget",
    "build_system_prompt": "appliance.loop._prompt",
    "escape_markers": "appliance.loop._untrusted",
    "Limits": "appliance.loop._limits",
    "ObservedSession": "appliance.loop._observed",
    "RunOutcome": "appliance.loop._agent",
    "StopRun": "appliance.loop._limits",
    "SystemPrompt": "appliance.loop._prompt",
    "TaskSettings": "appliance.loop._limits",
    "tool_specs": "appliance.loop._prompt",
    "wrap_result": "appliance.loop._untrusted",
}

__all__ = [
    "ABHED_MD",
    "AGENTS_MD",
    "BASE_PROMPT",
    "BUDGET_LIMIT_REACHED",
    "Agent",
    "Budget",
    "Limits",
    "ObservedSession",
    "RunOutcome",
    "StopRun",
    "SystemPrompt",
    "TaskSettings",
    "build_system_prompt",
    "escape_markers",
    "tool_specs",
    "wrap_result",
]

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
