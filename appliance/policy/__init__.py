"""Policy at dispatch: operator rules, modes, capabilities, approvals.

Precedence for one call: extensions' vetoes -> deny rules -> plan-mode
refusal of mutations -> ask (destructive bash patterns and unreadable bash
always ask; then ask rules) -> allow rules -> mode default.  bash is judged
per simple command after quotes are undone, so a compound command needs
every part allowed.  See docs/policy.md.

Errors: :class:`PolicyError` (under ``AbhedError``); refusals are results.
"""

from appliance.policy._approval import ScopedApproval, ScopedApprovalRequest, ScriptedApprover
from appliance.policy._bash import Parsed, SimpleCommand, split_command
from appliance.policy._destructive import destructive_reasons
from appliance.policy._engine import Decision, PolicyEngine, Verdict
from appliance.policy._errors import PolicyError
from appliance.policy._gate import CallHook, Gate, HookVerdict, normalize_args
from appliance.policy._settings import Mode, PolicySettings, Rule

__all__ = [
    "CallHook",
    "Decision",
    "Gate",
    "HookVerdict",
    "Mode",
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
    "split_command",
]
