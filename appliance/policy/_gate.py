"""Between the action event and execution: validate, normalize, judge, ask, record.

Order (DESIGN.md "the path of one tool call"): schema validation ->
normalization (paths resolved beneath the workspace, so rules and extensions
see what would really be touched) -> extensions (veto, ask, rewrite; never
allow) -> operator rules and mode -> the tool's own precheck (only when the
verdict is "ask": a call certain to fail is never put to a person) ->
approval.  Rewritten arguments are validated, normalized and judged again.
Every step that refuses returns a ``ToolResult`` the model can act on;
nothing here raises into the loop.

The gate is the only place a mode is applied: the loop, ``abhed tool`` and
rpc hand it the call and take what it returns.
"""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from appliance._session import Session
from appliance.events import ApprovalEvent, PolicyDecision, PolicyRuleAdded
from appliance.policy._approval import Approver, HeadlessApprover, ScopedApprovalRequest
from appliance.policy._engine import Decision, PolicyEngine, path_fields
from appliance.policy._mode import ChosenBy, ModeChoice, resolve_mode
from appliance.policy._settings import Mode, PolicySettings
from tools import (
    ARTIFACT_PREFIX,
    Args,
    Tool,
    ToolContext,
    ToolFailure,
    ToolResult,
    failure,
    validate_args,
)

__all__ = ["CallHook", "Gate", "HookVerdict", "normalize_args"]


@dataclass(frozen=True)
class HookVerdict:
    """The combined word of every extension on one call.  There is no way to say "allow"."""

    block: bool = False
    ask: bool = False
    by: tuple[str, ...] = ()  # extensions that blocked or asked
    reasons: tuple[str, ...] = ()
    args: dict[str, Any] | None = None  # rewritten arguments, if any extension rewrote them
    rewritten_by: tuple[str, ...] = ()


class CallHook(Protocol):
    """What the gate needs from the extension host."""

    def tool_call(self, call_id: str, tool: str, args: dict[str, Any]) -> HookVerdict: ...

    def tool_result(self, call_id: str, tool: str, args: dict[str, Any],
                    result: ToolResult) -> ToolResult: ...


def normalize_args(tool: Tool, raw: Any, ctx: ToolContext) -> Args:
    """Validated arguments with every path resolved beneath the workspace.

    The call's one validation (:func:`tools.validate_args`, with a schema
    tool's own schema): what this returns is an instance of the tool's
    ``args_model``, which the tool's precheck and :func:`tools.run_tool` take
    as validated.

    Raises ``ToolFailure`` for invalid arguments and for paths that are
    relative, outside the workspace or escape it through a symlink.  A path
    whose parent does not exist yet keeps its lexical absolute form.
    """
    args = validate_args(tool, raw)
    resolved: dict[str, str] = {}
    for name in path_fields(tool):
        value = getattr(args, name, None)
        if not isinstance(value, str):
            continue
        if value.startswith(ARTIFACT_PREFIX):
            continue  # a session artifact, resolved by the tool within the session's own blobs
        lexical = ctx.workspace.absolute(value, field=name)
        try:
            located = ctx.workspace.locate(value, field=name)
        except ToolFailure as exc:
            if exc.code in ("outside_workspace", "symlink_loop", "symlink_escape"):
                raise
            resolved[name] = lexical
            continue
        with located:
            resolved[name] = located.path
    return args.model_copy(update=resolved) if resolved else args


class Gate:
    """Policy at dispatch for one session (or subagent).

    Args:
        engine: operator rules, mode and capabilities.
        hook: the extension host, if extensions are configured.
        approver: who answers "ask"; ``None`` or a :class:`HeadlessApprover`
            means nobody can, so ask means deny.
        run_id: recorded in approval events (the loop sets it per run).
        chosen_by: who chose the engine's mode (recorded in ``run_started``).
        operator: the operator's ``policy`` section as configured, the ceiling
            :meth:`set_mode` holds a later change to (default: the engine's).
        config_file: where that section lives, named in a refusal.
        basis_digest: the ``decision_basis`` in force, named in every
            ``policy_decision`` (recorded where the tooling starts).
    """

    def __init__(self, engine: PolicyEngine, *, hook: CallHook | None = None,
                 approver: Approver | None = None, run_id: str = "",
                 chosen_by: ChosenBy = "operator", operator: PolicySettings | None = None,
                 config_file: str | None = None, basis_digest: str = "") -> None:
        self.engine = engine
        self.hook = hook
        self.approver = approver
        self.run_id = run_id
        self.basis_digest = basis_digest
        self.chosen_by: ChosenBy = chosen_by
        self.operator = operator if operator is not None else engine.settings
        self.config_file = config_file
        self._waited: dict[str, float] = {}  # call id -> ms its approval waited for an answer

    @classmethod
    def permissive(cls, *, approver: Approver | None = None) -> Gate:
        """Auto mode with no rules: what a trusted one-off caller or a test needs.

        Still the real path (validation, normalization, destructive patterns
        ask), so tests that use it exercise what production runs.
        """
        return cls(PolicyEngine(PolicySettings(mode="auto")), approver=approver, chosen_by="caller")

    @property
    def mode(self) -> ModeChoice:
        """The effective mode and who chose it."""
        return ModeChoice(self.engine.mode, self.chosen_by)

    def set_mode(self, requested: Mode | str, *, door: str) -> ModeChoice:
        """Change the mode between runs (rpc ``mode``, the TUI), bounded like every door.

        Raises ``ModeRefused`` for a mode looser than the operator's ``policy.mode``.
        """
        choice = resolve_mode(requested, self.operator, door=door, config_file=self.config_file)
        self.engine.settings = self.engine.settings.model_copy(update={"mode": choice.mode})
        self.chosen_by = choice.chosen_by
        return choice

    @property
    def can_ask(self) -> bool:
        """Whether an "ask" can reach someone (false: ask means deny)."""
        return self.approver is not None and not isinstance(self.approver, HeadlessApprover)

    def admit(self, session: Session, call_id: str, tool: Tool, raw_args: Any,
              ctx: ToolContext) -> ToolResult | Args:
        """The validated arguments to run ``tool`` with, or the result that refuses the call.

        Arguments are validated here once (again only when an extension
        rewrote them, since those are new arguments); the precheck and the
        runner take the validated instance as it is.
        """
        try:
            valid = normalize_args(tool, raw_args, ctx)
        except ToolFailure as exc:
            return exc.to_result()
        args = valid.model_dump()
        verdict = HookVerdict()
        if self.hook is not None:
            verdict = self.hook.tool_call(call_id, tool.name, args)
            if verdict.args is not None and verdict.args != args:
                try:
                    valid = normalize_args(tool, verdict.args, ctx)
                    args = valid.model_dump()
                except ToolFailure as exc:
                    who = ", ".join(verdict.rewritten_by)
                    return failure("extension_rewrite_invalid",
                                   f"Extension {who} rewrote the arguments of {tool.name} into ones "
                                   f"that are not valid ({exc.message}). Nothing was run. Tell the "
                                   "user; the extension needs fixing.")
        decision = self.engine.decide(tool, args, ctx.workspace.root)
        decision = self._with_hook(decision, verdict)
        session.append(PolicyDecision(session_id=session.id, call_id=call_id, tool=tool.name,
                                      verdict=decision.verdict, decided_by=decision.decided_by,
                                      reason=decision.reason, args=args,
                                      commands=list(decision.commands),
                                      basis_digest=self.basis_digest))
        if decision.verdict == "deny":
            return failure("policy_denied", f"Refused by policy ({decision.decided_by}): "
                           f"{decision.reason}", details={"decided_by": decision.decided_by})
        if decision.verdict == "ask":
            hopeless = tool.precheck(valid, ctx)
            if hopeless is not None:
                return hopeless  # certain to fail: the model hears why, nobody is asked
            refused = self._ask(session, call_id, tool, valid, decision, ctx)
            if refused is not None:
                return refused
        return valid

    def waited_ms(self, call_id: str) -> float:
        """How long ``call_id``'s approval waited for its answer (0 if nobody was asked); once."""
        return self._waited.pop(call_id, 0.0)

    def finish(self, call_id: str, tool: Tool, args: Args | Mapping[str, Any],
               result: ToolResult) -> ToolResult:
        """Let extensions rewrite the result before the model reads it."""
        if self.hook is None:
            return result
        values = args.model_dump() if isinstance(args, Args) else dict(args)
        return self.hook.tool_result(call_id, tool.name, values, result)

    @staticmethod
    def _with_hook(decision: Decision, verdict: HookVerdict) -> Decision:
        if not (verdict.block or verdict.ask):
            return decision
        by = ",".join(f"extension:{n}" for n in verdict.by)
        reason = "; ".join(verdict.reasons) or "an extension objected"
        if verdict.block:
            if decision.verdict == "deny":
                return decision  # the operator's rule is the more specific record
            return Decision("deny", by, reason)
        if decision.verdict == "allow":
            return Decision("ask", by, reason, commands=decision.commands)
        if decision.verdict == "ask":
            return Decision("ask", f"{decision.decided_by},{by}", f"{decision.reason}; {reason}",
                            commands=decision.commands)  # no "always": an extension asked
        return decision

    def _ask(self, session: Session, call_id: str, tool: Tool, valid: Args,
             decision: Decision, ctx: ToolContext) -> ToolResult | None:
        if self.approver is None or not self.can_ask:
            reason = ("nobody can answer: this run has no approver that can ask a person "
                      "(headless), and a call that needs approval is denied when nobody "
                      "can answer")
            session.append(ApprovalEvent(session_id=session.id, run_id=self.run_id, call_id=call_id,
                                         tool=tool.name, decision="deny", decided_by="headless",
                                         reason=reason))
            return failure("approval_unavailable",
                           f"{tool.name} needs approval ({decision.decided_by}: {decision.reason}), "
                           f"but {reason}. Nothing was run. Do it another way that needs no "
                           "approval, or stop and tell the user what you need approved.",
                           details={"decided_by": decision.decided_by})
        request = ScopedApprovalRequest(call_id=call_id, tool=tool.name, args=valid.model_dump(),
                                        reason=decision.reason, decided_by=decision.decided_by,
                                        commands=decision.commands, always_rules=decision.always,
                                        session_id=session.id,
                                        preview=tool.preview_of(valid, ctx) or "")
        asked = time.perf_counter()
        try:
            answer = self.approver.approve(request)
        finally:
            self._waited[call_id] = (time.perf_counter() - asked) * 1000
        allowed = answer.decision == "allow"
        session.append(ApprovalEvent(session_id=session.id, run_id=self.run_id, call_id=call_id,
                                     tool=tool.name, decision="allow" if allowed else "deny",
                                     decided_by=answer.decided_by, reason=answer.reason,
                                     approver=_account()))
        if not allowed:
            why = f" ({answer.reason})" if answer.reason else ""
            return failure("approval_denied", answer.declined_text or
                           f"The user declined this {tool.name} call{why}. Nothing was run. Do not "
                           "retry it unchanged; ask the user how they want to proceed.")
        if getattr(answer, "always", False):
            for rule in decision.always:
                rule_id = self.engine.add_session_rule(rule)
                session.append(PolicyRuleAdded(session_id=session.id, call_id=call_id,
                                               rule_id=rule_id,
                                               rule=rule.model_dump(exclude_defaults=True),
                                               added_by=answer.decided_by))
        return None


def _account() -> str:
    """Who answered: the account the session runs as (the TUI's user, or the rpc client's).

    Recorded with each approval so the SIEM's record names a person, not only
    a channel (claude-code#40634); the channel is ``decided_by``.
    """
    uid = os.getuid()
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:  # a uid with no passwd entry (a container's arbitrary user)
        return f"uid {uid}"
