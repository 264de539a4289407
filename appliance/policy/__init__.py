"""Policy at dispatch: operator rules, modes, capabilities, approvals.

Precedence for one call: extensions' vetoes -> deny rules -> plan-mode
refusal of mutations -> ask (destructive bash patterns and unreadable bash
always ask; then ask rules) -> allow rules -> mode default.  bash is judged
per simple command after quotes are undone, so a compound command needs
every part allowed.  Which mode a run gets is :func:`resolve_mode`'s answer,
the same at every door.  See docs/policy.md.

Errors: :class:`PolicyError` > :class:`ModeRefused` (under ``AbhedError``);
refused calls are results, not errors.

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:  # "X as X": an explicit re-export, so other packages type-check
    from appliance.policy._approval import Approval as Approval
    from appliance.policy._approval import ApprovalRequest as ApprovalRequest
    from appliance.policy._approval import Approver as Approver
    from appliance.policy._approval import CallbackApprover as CallbackApprover
    from appliance.policy._approval import HeadlessApprover as HeadlessApprover
    from appliance.policy._approval import ScopedApproval as ScopedApproval
    from appliance.policy._approval import ScopedApprovalRequest as ScopedApprovalRequest
    from appliance.policy._approval import ScriptedApprover as ScriptedApprover
    from appliance.policy._destructive import destructive_reasons as destructive_reasons
    from appliance.policy._engine import Decision as Decision
    from appliance.policy._engine import PolicyEngine as PolicyEngine
    from appliance.policy._engine import Verdict as Verdict
    from appliance.policy._errors import ModeRefused as ModeRefused
    from appliance.policy._errors import PolicyError as PolicyError
    from appliance.policy._gate import CallHook as CallHook
    from appliance.policy._gate import Gate as Gate
    from appliance.policy._gate import HookVerdict as HookVerdict
    from appliance.policy._gate import normalize_args as normalize_args
    from appliance.policy._mode import ChosenBy as ChosenBy
    from appliance.policy._mode import ModeChoice as ModeChoice
    from appliance.policy._mode import resolve_mode as resolve_mode
    from appliance.policy._mode import stricter_or_equal as stricter_or_equal
    from appliance.policy._settings import MODES as MODES
    from appliance.policy._settings import Mode as Mode
    from appliance.policy._settings import PolicySettings as PolicySettings
    from appliance.policy._settings import Rule as Rule
    from tools.shell import Parsed as Parsed
    from tools.shell import SimpleCommand as SimpleCommand
    from tools.shell import split_command as split_command

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "Approval": "appliance.policy._approval",
    "ApprovalRequest": "appliance.policy._approval",
    "Approver": "appliance.policy._approval",
    "CallbackApprover": "appliance.policy._approval",
    "CallHook": "appliance.policy._gate",
    "ChosenBy": "appliance.policy._mode",
    "Decision": "appliance.policy._engine",
    "destructive_reasons": "appliance.policy._destructive",
    "Gate": "appliance.policy._gate",
    "HeadlessApprover": "appliance.policy._approval",
    "HookVerdict": "appliance.policy._gate",
    "Mode": "appliance.policy._settings",
    "ModeChoice": "appliance.policy._mode",
    "ModeRefused": "appliance.policy._errors",
    "MODES": "appliance.policy._settings",
    "normalize_args": "appliance.policy._gate",
    "Parsed": "tools.shell",
    "PolicyEngine": "appliance.policy._engine",
    "PolicyError": "appliance.policy._errors",
    "PolicySettings": "appliance.policy._settings",
    "resolve_mode": "appliance.policy._mode",
    "Rule": "appliance.policy._settings",
    "ScopedApproval": "appliance.policy._approval",
    "ScopedApprovalRequest": "appliance.policy._approval",
    "ScriptedApprover": "appliance.policy._approval",
    "SimpleCommand": "tools.shell",
    "split_command": "tools.shell",
    "stricter_or_equal": "appliance.policy._mode",
    "Verdict": "appliance.policy._engine",
}

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

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
