"""Policy at dispatch: operator rules, modes, capabilities, approvals.

Precedence for one call: extensions' vetoes -> deny rules -> plan-mode
refusal of mutations -> ask (destructive bash patterns and unreadable bash
always ask; then ask rules) -> allow rules -> mode default.  bash is judged
per simple command after quotes are undone, so a compound command needs
every part allowed.  See docs/policy.md.

Errors: :class:`PolicyError` (under ``AbhedError``); refusals are results.

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from appliance.policy._approval import ScopedApproval, ScopedApprovalRequest, ScriptedApprover
    from appliance.policy._destructive import destructive_reasons
    from appliance.policy._engine import Decision, PolicyEngine, Verdict
    from appliance.policy._errors import PolicyError
    from appliance.policy._gate import CallHook, Gate, HookVerdict, normalize_args
    from appliance.policy._settings import Mode, PolicySettings, Rule
    from tools.shell import Parsed, SimpleCommand, split_command

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "CallHook": "appliance.policy._gate",
    "Decision": "appliance.policy._engine",
    "destructive_reasons": "appliance.policy._destructive",
    "Gate": "appliance.policy._gate",
    "HookVerdict": "appliance.policy._gate",
    "Mode": "appliance.policy._settings",
    "normalize_args": "appliance.policy._gate",
    "Parsed": "tools.shell",
    "PolicyEngine": "appliance.policy._engine",
    "PolicyError": "appliance.policy._errors",
    "PolicySettings": "appliance.policy._settings",
    "Rule": "appliance.policy._settings",
    "ScopedApproval": "appliance.policy._approval",
    "ScopedApprovalRequest": "appliance.policy._approval",
    "ScriptedApprover": "appliance.policy._approval",
    "SimpleCommand": "tools.shell",
    "split_command": "tools.shell",
    "Verdict": "appliance.policy._engine",
}

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

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all

    def __getattr__(name: str) -> typing.Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'appliance.policy' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_EXPORTS))
