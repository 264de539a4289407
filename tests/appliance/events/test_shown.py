"""Events in words (appliance.events.show): every kind, honest call outcomes, every door alike."""

from __future__ import annotations

import typing

import pytest

from appliance.events import (
    ActionEvent,
    ApprovalEvent,
    Compacted,
    DecisionBasis,
    Event,
    ExtensionDied,
    ExtensionLog,
    FileRestore,
    ForwardingChanged,
    LogRepaired,
    ModelTurn,
    ObservationEvent,
    PlanStepState,
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
    StoredEvent,
    TaskEnded,
    TaskStarted,
    TodoEntry,
    TodoUpdated,
    TurnToolCall,
    UndoApplied,
    UserMessage,
    call_outcome,
    call_summary,
    plural,
    show,
)
from cli.run import progress_line
from cli.sessions import show_line
from tools import ToolResult, failure

S = "s-1"


def obs(result: ToolResult, *, tool: str = "bash", ms: float = 12.0, wait: float = 0.0) -> ObservationEvent:
    return ObservationEvent(session_id=S, call_id="c1", tool=tool, result=result, duration_ms=ms,
                            approval_wait_ms=wait)


def success(out: str, **details: object) -> ToolResult:
    return ToolResult(ok=True, content=out, details=details)


def bash_result(out: str, **details: object) -> ToolResult:
    return success(out, **details)


ONE_OF_EACH: list[Event] = [
    SessionStarted(session_id=S, workspace="/w", abhed_version="1.0"),
    SessionEnded(session_id=S, reason="closed"),
    StartupNotice(session_id=S, kind="sandbox_fallback", subject="microvm", message="bwrap instead"),
    RunStarted(session_id=S, run_id="r1", provider="p", model="m", mode="ask",
               system_prompt_sha256="0"),
    UserMessage(session_id=S, run_id="r1", text="hello"),
    ModelTurn(session_id=S, run_id="r1", turn=1, text="thinking", duration_ms=1.0,
              tool_calls=[TurnToolCall(id="c1", name="read", arguments='{"path": "/w/a"}')]),
    ActionEvent(session_id=S, call_id="c1", tool="read", args={"path": "/w/a"}),
    obs(success("alpha"), tool="read"),
    ApprovalEvent(session_id=S, run_id="r1", call_id="c1", tool="bash", decision="allow",
                  decided_by="tui"),
    RunEnded(session_id=S, run_id="r1", reason="done", message="the model finished", turns=2),
    PolicyDecision(session_id=S, call_id="c1", tool="bash", verdict="ask", decided_by="mode:ask",
                   reason="mutating", args={}),
    PolicyRuleAdded(session_id=S, call_id="c1", rule_id="session-allow[0]",
                    rule={"tool": "bash", "command": "make *"}, added_by="tui"),
    ExtensionLog(session_id=S, extension="x", event="tool_call", kind="ignored", message="tried"),
    ExtensionDied(session_id=S, extension="x", event="tool_call", reason="timeout"),
    TodoUpdated(session_id=S, call_id="c1", items=[TodoEntry(id="1", content="a", status="done")]),
    PlanUpdated(session_id=S, call_id="c1", title="T",
                steps=[PlanStepState(step="s", status="in_progress")]),
    Compacted(session_id=S, trigger="auto", strategy="mask", masked_call_ids=["c1"],
              tokens_before=9000, tokens_after=4000, context_tokens=8192),
    UndoApplied(session_id=S, requested_by="tui", files=[FileRestore(path="/w/a", action="restored")]),
    TaskStarted(session_id=S, call_id="c1", child_session_id="s-2", agent_type="explore",
                description="look", reserved={"turns": 5}),
    TaskEnded(session_id=S, call_id="c1", child_session_id="s-2", status="done"),
    SegmentStarted(session_id="log", segment=2, previous_segment="a", previous_head_seq=1,
                   previous_head_hash="0", reason="size"),
    LogRepaired(session_id="log", damaged_file="/x", damaged_sha256="0", damage="d", last_good_seq=1,
                last_good_hash="0", highest_seq_seen=2, highest_hash_seen="0", lost_events=1,
                method="sql"),
    SegmentDeleted(session_id="log", segment="a", first_seq=1, last_seq=2, head_hash="0",
                   sha256="0", deleted_by="retention"),
    DecisionBasis(session_id=S, digest="ab" * 32, policy={}),
    ForwardingChanged(session_id="log", destination="syslog:/dev/log", state="interrupted",
                      error="connection refused"),
]


def test_every_event_kind_is_shown() -> None:
    union = typing.get_args(typing.get_args(Event)[0])
    assert {t.model_fields["type"].default for t in union} == {e.type for e in ONE_OF_EACH}
    for e in ONE_OF_EACH:
        shown = show(e)
        assert shown.kind == e.type and shown.title.strip(), e.type


def test_a_failing_command_is_failed_with_its_exit_code_and_the_lines_that_explain_it() -> None:
    out = "starting\nstep 1\nstep 2\nstep 3\nFATAL: no database\n[exit code 3]"
    o = call_outcome(obs(bash_result(out, exit_code=3, signal=None, timed_out=False)))
    assert o.status == "failed" and o.label == "failed (exit 3)"
    assert o.tail.splitlines()[-1] == "FATAL: no database" and "[exit code" not in o.tail
    assert len(o.tail.splitlines()) == 3


@pytest.mark.parametrize(("details", "label"), [
    ({"exit_code": None, "signal": 15}, "killed by SIGTERM"),
    ({"exit_code": None, "signal": 99}, "killed by signal 99"),
    ({"exit_code": None, "timed_out": True, "signal": 15}, "timed out"),
    ({"exit_code": None, "output_limited": True}, "killed (output over the limit)"),
    ({"exit_code": 0}, "ok"),
    ({"job_id": "job-1", "state": "running", "exit_code": None}, "ok"),
])
def test_killed_timed_out_and_ok_commands(details: dict[str, object], label: str) -> None:
    assert call_outcome(obs(bash_result("out\n[note]", **details))).label == label


def test_refusals_are_refused_not_failed() -> None:
    denied = failure("policy_denied", "Refused by policy (deny[2]): rm", details={"decided_by": "deny[2]"})
    assert call_outcome(obs(denied)).label == "refused by policy (deny[2])"
    declined = failure("approval_denied", "The user declined this bash call (no). Nothing was run.")
    o = call_outcome(obs(declined))
    assert o.status == "refused" and "declined" in o.tail
    broken = failure("not_found", "no such file /w/x")
    assert call_outcome(obs(broken, tool="read")).label == "failed (not_found)"


def test_run_time_and_approval_wait_apart() -> None:
    o = call_outcome(obs(success("Edited"), tool="edit", ms=7574.0, wait=7573.0))
    assert o.run_ms == pytest.approx(1.0) and o.timing == "1 ms, waited 7.6 s for approval"
    assert "7,574" not in show(obs(success("Edited"), tool="edit", ms=7574.0, wait=7573.0)).title


def test_hostile_and_oversized_results_stay_bounded() -> None:
    huge = "x" * 1_000_000 + "\n[exit code 1]"
    o = call_outcome(obs(bash_result(huge, exit_code=1)))
    assert len(o.tail) < 400
    weird = obs(ToolResult(ok=True, content="", details={"exit_code": True, "signal": "nine"}))
    assert call_outcome(weird).status == "ok"  # not a real exit code or signal: no claim
    assert call_summary("bash", "not a dict") == "not a dict"
    assert call_summary("bash", {"command": "cat > f <<'EOF'\nbody\nEOF"}) == "cat > f <<'EOF' …"
    assert len(call_summary("grep", {"pattern": "a" * 10_000})) <= 201
    assert call_summary("x", {"v": object()}) == ""


def test_wording() -> None:
    assert plural(1, "more line") == "1 more line" and plural(2, "more line") == "2 more lines"
    ended = RunEnded(session_id=S, run_id="r", reason="interrupted", message="interrupted (Esc)",
                     turns=1)
    assert show(ended).title.startswith("interrupted (Esc) (1 turn")
    allowed = ApprovalEvent(session_id=S, run_id="r", call_id="c", tool="bash", decision="allow",
                            decided_by="tui")
    assert show(allowed, you="tui").title == "bash: allowed by you"
    assert "tui" not in show(allowed).title.split("by", 1)[1]


def stored(e: Event) -> StoredEvent:
    return StoredEvent(1, 1, "0" * 64, e)


def test_compaction_and_failures_show_at_the_cli_doors() -> None:
    compacted = stored(ONE_OF_EACH[16])
    assert "compacted" in (progress_line(compacted) or "")
    assert "9,000 -> 4,000 tokens" in (show_line(compacted) or "")
    failed = stored(obs(bash_result("FATAL: x\n[exit code 3]", exit_code=3)))
    line = progress_line(failed) or ""
    assert line.startswith("← bash: failed (exit 3)") and "FATAL: x" in line
    assert "failed (exit 3)" in (show_line(failed) or "")
    assert show_line(stored(ONE_OF_EACH[10])) is None  # a decision: audit, in --json
    long = stored(UserMessage(session_id=S, run_id="r", text="y" * 5000))
    assert "3,000 more characters" in (show_line(long) or "")
