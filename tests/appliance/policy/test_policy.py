"""Policy at dispatch: modes, rules on resolved paths, approvals, capabilities, explain."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from appliance import events_db_path
from appliance.events import ApprovalEvent, EventStore, PolicyDecision, PolicyRuleAdded
from appliance.policy import (
    Approval,
    HeadlessApprover,
    PolicyEngine,
    PolicySettings,
    ScopedApproval,
    ScriptedApprover,
)
from cli import main
from tests.appliance.helpers import tooling
from tools import ToolResult


class Rig:
    """A session's tooling as every door builds it (``open_tooling``), under ``policy``."""

    def __init__(self, workspace: Path, policy: dict[str, Any], approver: Any = None) -> None:
        self.store = EventStore(events_db_path())
        self.d = tooling(self.store, workspace, approver=approver, run_id="r-1",
                         policy=policy).dispatcher
        self.session = self.d.session

    def call(self, tool: str, args: dict[str, Any]) -> ToolResult:
        return self.d.call(tool, args)

    def events(self, kind: type) -> list[Any]:
        return [e.event for e in self.store.events(self.session.id) if isinstance(e.event, kind)]


def test_plan_mode_runs_reads_and_refuses_mutations(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    r = Rig(workspace, {"mode": "plan", "allow": [{"tool": "write"}]})
    assert r.call("read", {"path": str(workspace / "a.txt")}).ok
    refused = r.call("write", {"path": str(workspace / "b.txt"), "content": "y"})
    assert not refused.ok and "plan mode" in refused.content and not (workspace / "b.txt").exists()


def test_ask_with_nobody_to_answer_means_deny_with_a_message(workspace: Path) -> None:
    for approver in (None, HeadlessApprover()):
        r = Rig(workspace, {"mode": "ask"}, approver=approver)
        result = r.call("write", {"path": str(workspace / "b.txt"), "content": "y"})
        assert result.error is not None and result.error.code == "approval_unavailable"
        assert "nobody can answer" in result.content and not (workspace / "b.txt").exists()
        assert [a.decided_by for a in r.events(ApprovalEvent)] == ["headless"]
        assert [a.approver for a in r.events(ApprovalEvent)] == [""]  # no person answered


def test_approval_once_then_always_stores_a_scoped_rule(workspace: Path) -> None:
    approver = ScriptedApprover([Approval("allow", "tui"),
                                 ScopedApproval("allow", "tui", "fine", always=True)])
    r = Rig(workspace, {"mode": "ask"}, approver=approver)
    target = str(workspace / "b.txt")
    assert r.call("write", {"path": target, "content": "1"}).ok
    result = r.call("bash", {"command": "git status && npm test", "description": "check"})
    # Admitted: policy and the approver let it through, and only then did it fail to run,
    # since this rig gives bash no sandbox (a refusal would be approval_denied/policy_denied).
    assert result.error is not None and result.error.code == "sandbox_unavailable", result.content
    assert [a.decision for a in r.events(ApprovalEvent)][-1] == "allow"
    req = approver.requests[-1]
    assert [x.describe() for x in req.always_rules] == [  # type: ignore[attr-defined]
        "tool=bash program=git subcommand=status", "tool=bash program=npm subcommand=test"]
    added = r.events(PolicyRuleAdded)
    assert [a.rule_id for a in added] == ["session-allow[0]", "session-allow[1]"]
    # now git status runs without asking; rm still asks (and the scripted approver then says no)
    r.call("bash", {"command": "git status", "description": "x"})
    assert len(approver.requests) == 2
    denied = r.call("bash", {"command": "rm notes.txt", "description": "x"})
    assert denied.error is not None and denied.error.code == "approval_denied"
    # Each answer names the person's account beside the channel (the SIEM's "who approved").
    me = f"{pwd.getpwuid(os.getuid()).pw_name} (uid {os.getuid()})"
    assert {a.approver for a in r.events(ApprovalEvent)} == {me}


def test_destructive_commands_ask_even_in_auto_mode(workspace: Path) -> None:
    r = Rig(workspace, {"mode": "auto"}, approver=HeadlessApprover())
    result = r.call("bash", {"command": "git push --force", "description": "x"})
    assert result.error is not None and result.error.code == "approval_unavailable"
    assert r.events(PolicyDecision)[0].decided_by == "destructive"


def test_rules_match_resolved_paths_not_the_spelling(workspace: Path) -> None:
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "k").write_text("x\n")
    (workspace / "docs").symlink_to(workspace / "secrets")
    r = Rig(workspace, {"mode": "auto", "deny": [{"tool": "read", "path": "secrets/**"}]})
    for spelling in ("secrets/k", "docs/k", "docs/../secrets/k", "secrets//k"):
        result = r.call("read", {"path": str(workspace) + "/" + spelling})
        assert not result.ok and "deny[0]" in result.content, spelling
    decision = r.events(PolicyDecision)[1]
    assert decision.args["path"] == str(workspace / "secrets" / "k")


def test_paths_outside_the_workspace_are_refused_before_policy(workspace: Path) -> None:
    r = Rig(workspace, {"mode": "auto", "allow": [{"tool": "read"}]})
    result = r.call("read", {"path": "/etc/passwd"})
    assert result.error is not None and result.error.code == "outside_workspace"
    assert r.events(PolicyDecision) == []


def test_capabilities_refuse_tools_outside_the_grant_and_subagents_attenuate(workspace: Path) -> None:
    r = Rig(workspace, {"mode": "auto", "capabilities": ["fs:read"]})
    result = r.call("write", {"path": str(workspace / "b.txt"), "content": "y"})
    assert result.error is not None and "fs:write" in result.content
    assert r.events(PolicyDecision)[0].decided_by == "capability"
    parent = PolicyEngine(PolicySettings(), capabilities=["fs:read", "fs:write"])
    child = parent.attenuated(["fs:read", "shell:exec"])
    assert child.capabilities == frozenset({"fs:read"})


@pytest.mark.parametrize("args_json", ['{"command": "rm -rf /", "description": "x"}',
                                       '{"command": 5}', "[]", "not json", '{"path": "rel"}'])
def test_explain_prints_a_decision_or_a_clear_refusal(args_json: str, workspace: Path) -> None:
    out = CliRunner().invoke(main, ["policy", "explain", "bash", args_json, "-w", str(workspace)])
    if args_json == "not json":
        assert out.exit_code == 2 and "not valid JSON" in out.output
        return
    assert out.exit_code == 0, out.output
    decision = json.loads(out.output.strip().splitlines()[-1])
    if "rm -rf" in args_json:
        assert (decision["verdict"], decision["decided_by"]) == ("ask", "destructive")
    else:
        assert decision["verdict"] == "invalid"


def test_explain_names_the_rule_and_runs_nothing(workspace: Path, abhed_home: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps({"policy": {
        "mode": "ask", "allow": [{"tool": "write", "path": "src/**"}]}}))
    (workspace / "src").mkdir()
    target = str(workspace / "src" / "new.py")
    out = CliRunner().invoke(main, ["policy", "explain", "write",
                                    json.dumps({"path": target, "content": "x"}), "-w", str(workspace)])
    decision = json.loads(out.output.strip().splitlines()[-1])
    assert (decision["verdict"], decision["decided_by"]) == ("allow", "allow[0]")
    assert not Path(target).exists()
    out = CliRunner().invoke(main, ["policy", "explain", "nosuchtool", "{}"])
    assert out.exit_code == 2 and "unknown tool" in out.output


def test_regression_an_edit_of_a_file_never_read_was_put_to_the_approver(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    approver = ScriptedApprover(then=Approval("allow", "tui"))
    r = Rig(workspace, {"mode": "ask"}, approver=approver)
    hopeless = [
        ("edit", {"path": str(workspace / "a.txt"), "old_string": "one", "new_string": "two"}),
        ("edit", {"path": str(workspace / "missing.txt"), "old_string": "x", "new_string": "y"}),
        ("write", {"path": str(workspace / "a.txt"), "content": "overwrite unseen"}),
    ]
    for tool, args in hopeless:
        result = r.call(tool, args)
        assert not result.ok and result.error is not None
        assert result.error.code not in ("approval_denied", "approval_unavailable"), result.content
    assert approver.requests == [] and r.events(ApprovalEvent) == []
    assert (workspace / "a.txt").read_text() == "one\n"
    # a call that could succeed still reaches the person
    assert r.call("read", {"path": str(workspace / "a.txt")}).ok
    ok = r.call("edit", {"path": str(workspace / "a.txt"), "old_string": "one", "new_string": "two"})
    assert ok.ok and len(approver.requests) == 1 and (workspace / "a.txt").read_text() == "two\n"


def test_a_relative_path_is_refused_before_any_approval(workspace: Path) -> None:
    approver = ScriptedApprover(then=Approval("allow", "tui"))
    r = Rig(workspace, {"mode": "ask"}, approver=approver)
    result = r.call("write", {"path": "rel.txt", "content": "x"})
    assert result.error is not None and result.error.code == "relative_path"
    assert approver.requests == []


def test_an_approval_request_says_who_asks_and_what_changes_and_the_wait_is_recorded_apart(
        workspace: Path) -> None:
    import time

    from appliance.events import ObservationEvent
    from appliance.policy import ApprovalRequest, CallbackApprover, ScopedApprovalRequest

    asked: list[ApprovalRequest] = []

    def slow(req: ApprovalRequest) -> Approval:
        asked.append(req)
        time.sleep(0.3)
        return Approval("allow", "tui")

    (workspace / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    r = Rig(workspace, {"mode": "ask"}, approver=CallbackApprover(slow))
    r.call("read", {"path": str(workspace / "a.txt")})
    assert r.call("edit", {"path": str(workspace / "a.txt"), "old_string": "line 20\n",
                           "new_string": "twenty\n"}).ok
    req = asked[0]
    assert isinstance(req, ScopedApprovalRequest) and req.session_id == r.session.id
    assert "@@ -17,7 +17,7 @@" in req.preview and "-line 20" in req.preview
    edit = r.events(ObservationEvent)[-1]
    assert edit.approval_wait_ms >= 300 and edit.duration_ms >= edit.approval_wait_ms
    assert r.events(ObservationEvent)[0].approval_wait_ms == 0.0  # the read asked nobody
