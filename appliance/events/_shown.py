"""Events as a person reads them: one typed function per event kind, for every door.

``abhed run``'s progress lines, ``abhed sessions show`` and the TUI's cards and
notes all say an event in the words written here, so a failed command is
called failed at every door, and a new event kind is shown everywhere once
it is added here (:func:`show` matches on the discriminated union and mypy
checks that no kind is left out).

What a door does with a :class:`Shown` (a symbol and colour, an indent, a
card) is its own business; the words, the status and what explains a
failure are decided here.  :func:`call_outcome` is the one judgement of how
a tool call ended: a bash command that exited 3 is *failed* (its result is
``ok`` for the model, which reads the exit code), one stopped by a signal is
*killed*, one past its timeout is *timed out*, one policy or a person
refused is *refused*.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from appliance.events._models import (
    ActionEvent,
    ApprovalEvent,
    Compacted,
    DecisionBasis,
    Event,
    ExtensionDied,
    ExtensionLog,
    ForwardingChanged,
    LogRepaired,
    ModelTurn,
    ObservationEvent,
    PlanUpdated,
    PolicyDecision,
    PolicyRuleAdded,
    RunEnded,
    RunStarted,
    SegmentDeleted,
    SegmentStarted,
    SessionEnded,
    SessionStarted,
    StartupNotice,
    TaskEnded,
    TaskStarted,
    TodoUpdated,
    UndoApplied,
    UserMessage,
)
from tools import ToolResult
from tools.todo import STATUS_MARKS

__all__ = [
    "CallOutcome",
    "CallStatus",
    "TAIL_LINES",
    "Shown",
    "Tone",
    "call_outcome",
    "call_summary",
    "decider",
    "plural",
    "result_outcome",
    "show",
    "status_lines",
]

CallStatus = Literal["ok", "failed", "refused", "killed", "timed_out"]
Tone = Literal["ok", "failed", "refused", "killed", "timed_out", "info", "warning", "error",
               "prompt", "answer", "audit"]

#: Lines of a failure's output kept to explain it (the end of stderr, the error message).
TAIL_LINES = 3
_TAIL_CHARS = 300
_REFUSALS = {"policy_denied", "approval_denied", "approval_unavailable", "interactive_command",
             "extension_blocked"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 line``, ``2 lines``: counts said as a person says them."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def decider(decided_by: str, *, you: str | None = None) -> str:
    """Who answered an approval, in words; ``you``: the door asking is that answerer."""
    if you is not None and decided_by == you:
        return "you"
    return {"auto": "policy", "headless": "nobody (no one could answer)", "tui": "the TUI's user",
            "rpc": "the rpc caller", "acp": "the editor's user (ACP)", "cli": "the command line",
            "scripted": "a script"}.get(
                decided_by, decided_by)


@dataclass(frozen=True)
class CallOutcome:
    """How one finished tool call ended.

    ``reason`` is empty for ``ok``, else a few words (``exit 3``, ``by
    SIGTERM``, ``by policy (deny[2])``: :attr:`label` joins them to the status); ``tail`` is what explains it
    (the last lines of the output before the exit note, or the error
    message), at most :data:`TAIL_LINES` lines.  ``run_ms`` excludes the time
    the call waited for a person's answer, which is ``wait_ms``.
    """

    status: CallStatus
    reason: str
    tail: str
    run_ms: float
    wait_ms: float

    @property
    def label(self) -> str:
        """``ok``, ``failed (exit 3)``, ``timed out (after 30 s)``: status and reason in one."""
        word = self.status.replace("_", " ")
        if not self.reason or self.reason == word:
            return word
        if self.reason.startswith("by "):
            return f"{word} {self.reason}"
        return f"{word} ({self.reason})"

    @property
    def timing(self) -> str:
        """``12 ms``, or ``3 ms, waited 7.6 s for approval``."""
        out = _duration(self.run_ms)
        if self.wait_ms >= 1:
            out += f", waited {_duration(self.wait_ms)} for approval"
        return out


def _duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:,.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {ms % 60_000 / 1000:.0f} s"


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _explaining_tail(content: str) -> str:
    """The last few non-empty lines before the trailing ``[...]`` notes a tool appends."""
    lines = content.rstrip("\n").split("\n")
    while lines and lines[-1].startswith("[") and lines[-1].endswith("]"):
        lines.pop()
    kept = [ln if len(ln) <= _TAIL_CHARS else ln[:_TAIL_CHARS] + " …"
            for ln in lines if ln.strip()][-TAIL_LINES:]
    return "\n".join(kept)


def result_outcome(result: ToolResult, duration_ms: float, wait_ms: float = 0.0) -> CallOutcome:
    """:func:`call_outcome` for a result not (yet) in an event."""
    run_ms = max(0.0, duration_ms - wait_ms)
    d = result.details
    if not result.ok:
        code = result.error.code if result.error else "error"
        message = result.error.message if result.error else result.content
        if code in _REFUSALS:
            by = d.get("decided_by")
            reason = {"policy_denied": f"by policy ({by})" if by else "by policy",
                      "approval_denied": "you said no" if "declined" in message else "denied",
                      "approval_unavailable": "nobody could approve it",
                      "interactive_command": "needs a terminal"}.get(code, code)
            return CallOutcome("refused", reason, _explaining_tail(message), run_ms, wait_ms)
        return CallOutcome("failed", code, _explaining_tail(message), run_ms, wait_ms)
    if d.get("timed_out"):
        return CallOutcome("timed_out", "", _explaining_tail(result.content), run_ms, wait_ms)
    if d.get("output_limited"):
        return CallOutcome("killed", "output over the limit", _explaining_tail(result.content),
                           run_ms, wait_ms)
    sig = d.get("signal")
    if isinstance(sig, int) and not isinstance(sig, bool):
        return CallOutcome("killed", f"by {_signal_name(sig)}", _explaining_tail(result.content),
                           run_ms, wait_ms)
    exit_code = d.get("exit_code")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0 \
            and d.get("state") != "running":
        return CallOutcome("failed", f"exit {exit_code}", _explaining_tail(result.content), run_ms,
                           wait_ms)
    return CallOutcome("ok", "", "", run_ms, wait_ms)


def call_outcome(e: ObservationEvent) -> CallOutcome:
    """How the call ``e`` records ended: ok, failed, refused, killed or timed out, and why."""
    return result_outcome(e.result, e.duration_ms, e.approval_wait_ms)


def call_summary(tool: str, args: Any, *, width: int = 200) -> str:
    """The one argument that says what a call does: bash's command, a file tool's path.

    One line (a multi-line value ends in `` …``), at most ``width`` characters.
    """
    if not isinstance(args, dict):
        return _clip(str(args), width)
    if tool == "todo" and isinstance(args.get("items"), list):
        return plural(len(args["items"]), "item")
    if tool == "task" and isinstance(args.get("description"), str):
        return _clip(args["description"], width)
    if tool == "plan" and isinstance(args.get("title"), str):
        return _clip(args["title"], width)
    if tool == "bash" and isinstance(args.get("job_id"), str) and not args.get("command"):
        return f"job {args['job_id']}" + (" (stop)" if args.get("kill") else "")
    for name in ("command", "path", "pattern", "query", "url", "name"):
        value = args.get(name)
        if isinstance(value, str):
            return _clip(value, width)
    try:
        return _clip(json.dumps(args, ensure_ascii=False), width)
    except (TypeError, ValueError):
        return ""


def _clip(text: str, width: int) -> str:
    first, nl, _ = text.partition("\n")
    more = " …" if nl else ""
    return first[:width] + ("…" if len(first) > width else "") + more


def status_lines(items: list[tuple[str, str]], *, numbered: bool = False) -> str:
    """A todo list or plan as lines: ``[x] content`` (``1. [x] step`` when ``numbered``)."""
    if not items:
        return "(empty)"
    return "\n".join(f"{f'{n}. ' if numbered else ''}{STATUS_MARKS.get(status, '[?]')} {text}"
                     for n, (status, text) in enumerate(items, 1))


@dataclass(frozen=True)
class Shown:
    """One event in words: a one-line ``title`` and, when it has one, a multi-line ``body``.

    ``tone`` says how it went (a door picks a symbol or colour from it);
    ``audit`` marks records a person reads only when auditing (decisions,
    the log's own events), which conversational doors leave out.
    """

    kind: str
    title: str
    body: str = ""
    tone: Tone = "info"
    audit: bool = False

    def text(self, indent: str = "  ") -> str:
        """Title and body as plain text, the body indented."""
        if not self.body:
            return self.title
        return self.title + "\n" + "\n".join(indent + ln for ln in self.body.split("\n"))


def _run_ended(e: RunEnded) -> Shown:
    message = e.message
    lead = e.reason.replace("_", " ")
    title = message if message.lower().startswith(lead) else f"{lead}: {message}"
    tone: Tone = "ok" if e.reason == "done" else ("warning" if e.reason == "interrupted"
                                                  else "error")
    return Shown("run_ended", f"{title} ({plural(e.turns, 'turn')}, "
                 f"{e.prompt_tokens + e.completion_tokens:,} tokens)", tone=tone)


def _observation(e: ObservationEvent) -> Shown:
    out = call_outcome(e)
    r = e.result
    if out.status == "ok":
        first = r.content.split("\n", 1)[0] if r.content else ""
        return Shown("observation", f"{e.tool}: ok ({out.timing}) {_clip(first, 120)}".rstrip(),
                     tone="ok")
    return Shown("observation", f"{e.tool}: {out.label} ({out.timing})", out.tail, tone=out.status)


def _compacted(e: Compacted) -> Shown:
    how = "summarised" if e.strategy == "summary" else "old tool outputs masked"
    masked = f", {plural(len(e.masked_call_ids), 'output')} masked" if e.masked_call_ids else ""
    who = "by hand" if e.trigger == "manual" else "automatically, the context was filling"
    return Shown("compacted", f"conversation compacted {who} ({how}): {e.tokens_before:,} -> "
                 f"{e.tokens_after:,} tokens of {e.context_tokens:,}{masked}",
                 e.summary if e.strategy == "summary" else "")


def _undo(e: UndoApplied) -> Shown:
    done = [f.path for f in e.files if f.action in ("restored", "deleted")]
    refused = [f"{f.path} ({f.reason})" for f in e.files if f.action == "refused"]
    skipped = [f.path for f in e.files if f.action == "skipped"]
    title = (f"{e.kind}: restored {plural(len(done), 'file')}" if done
             else f"{e.kind}: no file to restore")
    if skipped:
        title += f"; left as they are: {', '.join(skipped)}"
    if refused:
        title += f"; refused {', '.join(refused)}"
    if e.bash_calls_not_undone:
        title += (f"; {plural(e.bash_calls_not_undone, 'bash command')} ran in those runs and "
                  "what they did is not undone")
    return Shown("undo_applied", title, "\n".join(done), tone="error" if refused else "info")


def show(event: Event, *, you: str | None = None) -> Shown:
    """``event`` in words.  ``you``: the approver name of the door showing it (``tui``), so
    that door says "allowed by you"."""
    match event:
        case SessionStarted():
            parent = (f", subagent of {event.parent_session_id} call {event.parent_call_id}"
                      if event.parent_session_id else "")
            return Shown(event.type, f"session started (abhed {event.abhed_version or '?'}"
                         f"{parent}) in {event.workspace}")
        case SessionEnded():
            return Shown(event.type, f"session ended: {event.reason}")
        case StartupNotice():
            tone: Tone = "warning" if event.kind == "sandbox_fallback" else "error"
            return Shown(event.type, event.message, tone=tone)
        case RunStarted():
            return Shown(event.type, f"run {event.run_id}: {event.model} in {event.mode} mode"
                         + (" (resumed)" if event.resumed else ""))
        case UserMessage():
            return Shown(event.type, "steer:" if event.kind == "steer" else "user:", event.text,
                         tone="prompt")
        case ModelTurn():
            calls = "\n".join(f"-> {c.name} {_clip(c.arguments, 200)}" for c in event.tool_calls)
            return Shown(event.type, "model:", "\n".join(p for p in (event.text.strip(), calls)
                                                         if p), tone="answer")
        case ActionEvent():
            return Shown(event.type, f"{event.tool} {call_summary(event.tool, event.args)}"
                         + ("" if event.source == "model" else f"  [{event.source}]"))
        case ObservationEvent():
            return _observation(event)
        case ApprovalEvent():
            word = "allowed" if event.decision == "allow" else "denied"
            return Shown(event.type, f"{event.tool}: {word} by {decider(event.decided_by, you=you)}"
                         + (f": {event.reason}" if event.reason else ""),
                         tone="ok" if event.decision == "allow" else "refused")
        case RunEnded():
            return _run_ended(event)
        case PolicyDecision():
            return Shown(event.type, f"{event.tool}: policy says {event.verdict} "
                         f"({event.decided_by}): {event.reason}", audit=True)
        case PolicyRuleAdded():
            rule = " ".join(f"{k}={v}" for k, v in event.rule.items() if v not in (None, "", {}))
            return Shown(event.type, f"stored for this session: allow {rule or event.rule_id}"
                         f" (answered by {decider(event.added_by, you=you)})")
        case ExtensionLog():
            return Shown(event.type, f"extension {event.extension} ({event.kind}): "
                         f"{event.message}", audit=event.kind == "log")
        case ExtensionDied():
            return Shown(event.type, f"extension {event.extension} stopped answering while "
                         f"handling {event.event} ({event.reason}); it is skipped for the rest "
                         "of the session", tone="error")
        case TodoUpdated():
            return Shown(event.type, "todo:", status_lines(
                [(i.status, f"{i.id}: {i.content}") for i in event.items]))
        case PlanUpdated():
            body = status_lines([(s.status, s.step) for s in event.steps], numbered=True)
            return Shown(event.type, f"plan: {event.title}",
                         body + (f"\n{event.notes}" if event.notes else ""))
        case Compacted():
            return _compacted(event)
        case UndoApplied():
            return _undo(event)
        case TaskStarted():
            budget = ", ".join(f"{k} {v:g}" for k, v in event.reserved.items())
            return Shown(event.type, f"subagent {event.agent_type} started: {event.description}"
                         f" (session {event.child_session_id}"
                         + (f"; reserved {budget}" if budget else "") + ")")
        case TaskEnded():
            spent = ", ".join(f"{k} {v:g}" for k, v in event.spent.items())
            files = ", ".join(event.files_changed) or "none"
            return Shown(event.type, f"subagent {event.child_session_id} ended: {event.status};"
                         f" files changed: {files}" + (f"; spent {spent}" if spent else ""),
                         tone="ok" if event.status == "done" else "error")
        case ForwardingChanged():
            if event.state == "restored":
                title = (f"forwarding to {event.destination} restored: {event.replayed:,} sent "
                         f"late, {event.lost:,} lost")
            else:
                title = (f"forwarding to {event.destination} {event.state}"
                         + (f": {event.error}" if event.error else "")
                         + (f" ({event.lost:,} events lost)" if event.lost else ""))
            return Shown(event.type, title, tone="ok" if event.state == "restored" else "error",
                         audit=True)
        case DecisionBasis():
            return Shown(event.type, f"decision basis {event.digest[:12]}", audit=True)
        case SegmentStarted():
            return Shown(event.type, f"log segment {event.segment} started ({event.reason})",
                         audit=True)
        case LogRepaired():
            return Shown(event.type, f"log repaired: {plural(event.lost_events, 'event')} lost, "
                         f"damaged file kept at {event.damaged_file}", tone="error", audit=True)
        case SegmentDeleted():
            return Shown(event.type, f"log segment {event.segment} deleted by "
                         f"{event.deleted_by}", audit=True)
        case ForwardingChanged():
            lost = f", {plural(event.lost, 'event')} never sent" if event.lost else ""
            if event.state == "interrupted":
                return Shown(event.type, f"forwarding to {event.destination} interrupted: "
                             f"{event.error}; events are kept in the log and sent when it is "
                             "back", tone="warning", audit=True)
            return Shown(event.type, f"forwarding to {event.destination} {event.state}: "
                         f"{plural(event.missed, 'event')} missed, {event.replayed} sent late"
                         f"{lost}", tone="warning" if event.lost else "info", audit=True)
        case _:
            assert_never(event)
