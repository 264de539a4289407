"""The agent loop: prompt assembly, the loop itself, limits, approvals.

Public surface: :class:`Agent` (and :class:`RunOutcome`), :class:`Limits`,
the approval seam (:class:`Approver`, :class:`ApprovalRequest`,
:class:`Approval`, and the stock approvers), :class:`ObservedSession`, the
system prompt builder, untrusted-content wrapping, and :func:`start_agent`.

Control flow is not an error: limits and interrupts end a run through
:class:`StopRun`, caught in one place; configuration problems raise
:class:`appliance.ConfigError` or :class:`models.ModelsError` before a run starts.

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from appliance.loop._agent import Agent, RunOutcome
    from appliance.loop._budget import BUDGET_LIMIT_REACHED, Budget
    from appliance.loop._approver import Approval, ApprovalRequest, Approver, AutoApprover, CallbackApprover, HeadlessApprover, MODES
    from appliance.loop._limits import Limits, StopRun
    from appliance.loop._observed import ObservedSession
    from appliance.loop._prompt import ABHED_MD, AGENTS_MD, BASE_PROMPT, SystemPrompt, build_system_prompt, tool_specs
    from appliance.loop._setup import choose_provider, start_agent
    from appliance.loop._untrusted import escape_markers, wrap_result

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "ABHED_MD": "appliance.loop._prompt",
    "AGENTS_MD": "appliance.loop._prompt",
    "BUDGET_LIMIT_REACHED": "appliance.loop._budget",
    "Budget": "appliance.loop._budget",
    "Agent": "appliance.loop._agent",
    "Approval": "appliance.loop._approver",
    "ApprovalRequest": "appliance.loop._approver",
    "Approver": "appliance.loop._approver",
    "AutoApprover": "appliance.loop._approver",
    "BASE_PROMPT": "appliance.loop._prompt",
    "build_system_prompt": "appliance.loop._prompt",
    "CallbackApprover": "appliance.loop._approver",
    "choose_provider": "appliance.loop._setup",
    "escape_markers": "appliance.loop._untrusted",
    "HeadlessApprover": "appliance.loop._approver",
    "Limits": "appliance.loop._limits",
    "MODES": "appliance.loop._approver",
    "ObservedSession": "appliance.loop._observed",
    "RunOutcome": "appliance.loop._agent",
    "start_agent": "appliance.loop._setup",
    "StopRun": "appliance.loop._limits",
    "SystemPrompt": "appliance.loop._prompt",
    "tool_specs": "appliance.loop._prompt",
    "wrap_result": "appliance.loop._untrusted",
}

__all__ = [
    "ABHED_MD",
    "AGENTS_MD",
    "BASE_PROMPT",
    "BUDGET_LIMIT_REACHED",
    "MODES",
    "Agent",
    "Approval",
    "ApprovalRequest",
    "Approver",
    "AutoApprover",
    "Budget",
    "CallbackApprover",
    "HeadlessApprover",
    "Limits",
    "ObservedSession",
    "RunOutcome",
    "StopRun",
    "SystemPrompt",
    "build_system_prompt",
    "choose_provider",
    "escape_markers",
    "start_agent",
    "tool_specs",
    "wrap_result",
]

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all

    def __getattr__(name: str) -> typing.Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'appliance.loop' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_EXPORTS))
