"""Policy at dispatch: operator rules, modes, capabilities, approvals.

Precedence for one call: extensions' vetoes -> deny rules -> plan-mode
refusal of mutations -> ask (destructive bash patterns and unreadable bash
always ask; then ask rules) -> allow rules -> mode default.  bash is judged
per simple command after quotes are undone, so a compound command needs
every part allowed.  Which mode a run gets is :func:`resolve_mode`'s answer,
the same at every door.  See docs/policy.md.

Errors: :class:`PolicyError` > :class:`ModeRefused` (under ``AbhedError``);
refused calls are results, not errors.
"""

from __future__ import annotations

from appliance.policy._approval import (
    Approval,
    ApprovalRequest,
    Approver,
    CallbackApprover,
    HeadlessApprover,
    ScopedApproval,
    ScopedApprovalRequest,
    ScriptedApprover,
)
from appliance.policy._destructive import destructive_reasons
from appliance.policy._engine import Decision, PolicyEngine, Verdict
from appliance.policy._errors import ModeRefused, PolicyError
from appliance.policy._gate import CallHook, Gate, HookVerdict, normalize_args
from appliance.policy._mode import ChosenBy, ModeChoice, resolve_mode, stricter_or_equal
from appliance.policy._settings import MODES, Mode, PolicySettings, Rule
from tools.shell_parser import Parsed, SimpleCommand, split_command

__all__ = [
    "MODES",
    "Approval",
    "ApprovalRequest",
    "Approver",
    "CallHook",
    "CallbackApprover",
    "ChosenBy",
    "Decision",
    "Gate",
    "HeadlessApprover",
    "HookVerdict",
    "Mode",
    "ModeChoice",
    "ModeRefused",
    "Parsed",
    "PolicyEngine",
    "PolicyError",
    "PolicySettings",
    "Rule",
    "ScopedApproval",
    "ScopedApprovalRequest",
    "ScriptedApprover",
    "SimpleCommand",
    "Verdict",
    "destructive_reasons",
    "normalize_args",
    "resolve_mode",
    "split_command",
    "stricter_or_equal",
]
