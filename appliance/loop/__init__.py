"""The agent loop: prompt assembly, the loop itself, limits, approvals.

Public surface: :class:`Agent` (and :class:`RunOutcome`), :class:`Limits`,
the approval seam (:class:`Approver`, :class:`ApprovalRequest`,
:class:`Approval`, and the stock approvers), :class:`ObservedSession`, the
system prompt builder, untrusted-content wrapping, and :func:`start_agent`.

Control flow is not an error: limits and interrupts end a run through
:class:`StopRun`, caught in one place; configuration problems raise
:class:`appliance.ConfigError` or :class:`models.ModelsError` before a run starts.
"""

from __future__ import annotations

from appliance.loop._agent import Agent, RunOutcome
from appliance.loop._approver import (
    MODES,
    Approval,
    ApprovalRequest,
    Approver,
    AutoApprover,
    CallbackApprover,
    HeadlessApprover,
)
from appliance.loop._limits import Limits, StopRun
from appliance.loop._observed import ObservedSession
from appliance.loop._prompt import (
    ABHED_MD,
    BASE_PROMPT,
    SystemPrompt,
    build_system_prompt,
    tool_specs,
)
from appliance.loop._setup import choose_provider, start_agent
from appliance.loop._untrusted import escape_markers, wrap_result

__all__ = [
    "ABHED_MD",
    "BASE_PROMPT",
    "MODES",
    "Agent",
    "Approval",
    "ApprovalRequest",
    "Approver",
    "AutoApprover",
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
