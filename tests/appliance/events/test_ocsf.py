"""OCSF export: every event a valid OCSF 1.8.0 record that traces back to its row of the chain."""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import pytest

import appliance.events as ev
from appliance.events._ocsf import OcsfMapper
from appliance.events.maintenance import export_log
from models.scripted import ScriptedServer
from tests.appliance.events.logs import Cli
from tests.appliance.events.ocsf_schema import ocsf_problems
from tools import ToolResult

HUGE = "Ω\u0000\x1b[31m" + "x" * 200_000  # control bytes, escape codes, far over every cap


def _samples(session: str) -> list[ev.Event]:
    """One of every event kind, with the awkward values a log really holds."""
    return [
        ev.SessionStarted(session_id=session, workspace="/w", abhed_version="9.9",
                       settings={"release": "7", "bundle_manifest_sha256": "ab" * 32,
                                 "signing_key_ids": ["0123456789ABCDEF"],
                                 "site_settings_sha256": "cd" * 32,
                                 "effective_settings_sha256": "ef" * 32,
                                 "model_signature": {"key": "12" * 32, "digest": "34" * 32}}),
        ev.RunStarted(session_id=session, run_id="r1", provider="local", model="qwen",
                   mode="ask", system_prompt_sha256="0" * 64),
        ev.UserMessage(session_id=session, run_id="r1", text=HUGE),
        ev.ModelTurn(session_id=session, run_id="r1", turn=1, text="",
                  tool_calls=[ev.TurnToolCall(id="c1", name="bash", arguments="{not json")],
                  usage=ev.TurnUsage(prompt_tokens=5, completion_tokens=7), duration_ms=3.5),
        ev.ActionEvent(session_id=session, call_id="c1", tool="bash",
                    args={"command": HUGE, "description": "d"}),
        ev.PolicyDecision(session_id=session, call_id="c1", tool="bash", verdict="ask",
                       decided_by="destructive", reason="rm -rf", args={"command": "rm -rf /"},
                       commands=["rm -rf /"], basis_digest="a" * 64),
        ev.ApprovalEvent(session_id=session, run_id="r1", call_id="c1", tool="bash",
                      decision="deny", decided_by="tui", reason="no", approver="ana (uid 1000)"),
        ev.PolicyRuleAdded(session_id=session, call_id="c1", rule_id="session-allow[0]",
                        rule={"tool": "bash", "program": "git"}, added_by="tui"),
        ev.ObservationEvent(session_id=session, call_id="c1", tool="bash", duration_ms=1.0,
                         result=ToolResult(ok=True, content="x\n[exit code 3]",
                                           details={"exit_code": 3, "sandbox": "microvm",
                                                    "cwd": "/w"})),
        ev.ObservationEvent(session_id=session, call_id="c9", tool="write", duration_ms=1.0,
                         result=ToolResult(ok=True, content="Created",
                                           details={"path": "/w/a b.txt", "created": True,
                                                    "changed": True, "sha256_after": "f" * 64,
                                                    "diff": HUGE})),
        ev.ObservationEvent(session_id=session, call_id="c8", tool="mcp__x__y", duration_ms=1.0,
                         result=ToolResult(ok=False, content="boom",
                                           error={"code": "mcp_error", "message": "boom"},
                                           details={"nested": {"deep": [HUGE]}})),
        ev.TodoUpdated(session_id=session, call_id="c2", items=[
            ev.TodoEntry(id="1", content="a", status="pending")]),
        ev.PlanUpdated(session_id=session, call_id="c3", title="t",
                    steps=[ev.PlanStepState(step="s", status="done")]),
        ev.Compacted(session_id=session, trigger="auto", strategy="mask", masked_call_ids=["c1"],
                  tokens_before=10, tokens_after=5, context_tokens=100),
        ev.UndoApplied(session_id=session, requested_by="cli", files=[
            ev.FileRestore(path="/w/a", action="restored", sha256_before="1" * 64)]),
        ev.TaskStarted(session_id=session, call_id="c4", child_session_id="s-child",
                    agent_type="explore", description="look", reserved={"turns": 3}),
        ev.TaskEnded(session_id=session, call_id="c4", child_session_id="s-child", status="done"),
        ev.DecisionBasis(session_id=session, digest="a" * 64, policy={"mode": "ask", "deny": []},
                      tools={"bash": {}}),
        ev.ExtensionLog(session_id=session, extension="guard", event="tool_call", kind="ignored",
                     message="tried to allow"),
        ev.ExtensionDied(session_id=session, extension="guard", event="tool_call", reason="hung"),
        ev.StartupNotice(session_id=session, kind="sandbox_fallback", subject="microvm",
                      message="no /dev/kvm"),
        ev.RunEnded(session_id=session, run_id="r1", reason="max_turns", message="stop", turns=3),
        ev.SessionEnded(session_id=session, reason="done"),
        ev.SegmentStarted(session_id="log", segment=2, previous_segment="events.000001.db",
                       previous_head_seq=9, previous_head_hash="b" * 64, reason="size"),
        ev.SegmentDeleted(session_id="log", segment="events.000001.db", first_seq=1, last_seq=9,
                       head_hash="b" * 64, sha256="c" * 64, deleted_by="ana (uid 1000)"),
        ev.ForwardingChanged(session_id="log", destination="syslog:/dev/log", state="restored",
                          error="Connection refused (/dev/log)", since="2026-12-01T00:00:00Z",
                          missed=1200, replayed=1000, lost=200, first_missed_seq=3,
                          last_missed_seq=1202),
        ev.LogRepaired(session_id="log", damaged_file="/x", damaged_sha256="d" * 64, damage="page 5",
                    last_good_seq=3, last_good_hash="e" * 64, highest_seq_seen=4,
                    highest_hash_seen="f" * 64, lost_events=1, method="rowid"),
    ]


def test_every_kind_of_event_maps_to_a_valid_ocsf_record(tmp_path: Path) -> None:
    samples = _samples("s-1")
    union = typing.get_args(typing.get_args(ev.Event)[0])
    kinds = {typing.get_args(m.model_fields["type"].annotation)[0] for m in union}
    assert {e.type for e in samples} == kinds, "a new event kind needs an OCSF mapping and a sample"
    store = ev.EventStore(tmp_path / "events.db")
    store.create_session("s-1", "/w", "2026-12-01T00:00:00Z")
    for event in samples:
        store.append(event)
    out = tmp_path / "audit.ocsf.jsonl"
    export_log(store, out, fmt="ocsf")
    rows = list(store.rows())
    store.close()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(samples) + 1
    for row, record in zip(rows, records):
        assert ocsf_problems(record) == [], (row.type, ocsf_problems(record))
        # The record names its row of the chain.
        assert record["metadata"]["sequence"] == row.seq
        assert record["metadata"]["uid"] == row.hash
        assert record["unmapped"]["abhed"]["prev_hash"] == row.prev_hash
        assert record["metadata"]["event_code"] == row.type
        # No record carries the 200,000-character value whole: a SIEM line limit never cuts one.
        assert len(json.dumps(record)) < 40_000, row.type
    assert ocsf_problems(records[-1]) == []
    assert records[-1]["activity_name"] == "Export"
    assert records[-1]["unmapped"]["abhed"]["manifest"]["last_hash"] == rows[-1].hash
    by_type = {r["metadata"]["event_code"]: r for r in records[:-1]}
    cut = by_type["user_message"]
    assert cut["metadata"]["is_truncated"] is True and "cut at 2048" in cut["message"]
    # The session start carries what governed it, as its OCSF policy.
    started = by_type["session_started"]
    assert started["policy"]["uid"] == "ef" * 32 and started["policy"]["version"] == "7"
    assert started["policy"]["data"]["model_signature"]["key"] == "12" * 32
    # An ask, its refusal by a person, the process it would have run.
    assert by_type["policy_decision"]["authorizations"] == [
        {"decision": "ask", "policy": by_type["policy_decision"]["policy"]}]
    assert by_type["policy_decision"]["policy"]["name"] == "destructive"
    assert by_type["approval"]["disposition"] == "Rejected"
    assert by_type["approval"]["actor"]["user"] == {"name": "ana (uid 1000)"}
    proc = next(r for r in records if r["class_uid"] == 1007)
    assert proc["exit_code"] == 3 and proc["status"] == "Failure"
    assert proc["process"]["cmd_line"].startswith("Ω") and proc["metadata"]["is_truncated"]
    written = next(r for r in records if r["class_uid"] == 1001)
    assert written["activity_name"] == "Create" and written["file"]["name"] == "a b.txt"


def _run_session(abhed: Cli, home: Path, ws: Path) -> str:
    target = ws / "notes.txt"
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "write", "arguments": {"path": str(target),
                                                         "content": "hello\n"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "wc -l notes.txt",
                                                        "description": "count"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "curl http://example.com",
                                                        "description": "fetch"}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": str(target)}}]},
        {"text": "one line"},
    ]
    with ScriptedServer(steps) as server:
        (home / "config.json").write_text(json.dumps({
            "custom_providers": [{"name": "local", "api": "openai", "base_url": server.base_url,
                                  "model": "scripted", "max_retries": 0}],
            "sandbox": {"backend": "bwrap"},
            "policy": {"mode": "auto", "deny": [{"tool": "bash", "program": "curl",
                                                 "reason": "no network from the agent"}]}}))
        done = abhed("run", "count the lines", "--workspace", str(ws))
    assert done.returncode == 0, done.stderr
    return done.stderr.split("session: ", 1)[1].split()[0]


def test_a_real_session_exported_as_ocsf_validates_and_traces_to_the_chain(
        abhed: Cli, abhed_home: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    session = _run_session(abhed, abhed_home, ws)
    ocsf, jsonl = tmp_path / "audit.ocsf.jsonl", tmp_path / "audit.jsonl"
    done = abhed("events", "export", "--format", "ocsf", "--out", str(ocsf))
    assert done.returncode == 0, done.stderr
    assert "as OCSF 1.8.0 records" in done.stdout
    assert abhed("events", "export", "--out", str(jsonl)).returncode == 0
    records = [json.loads(line) for line in ocsf.read_text().splitlines()]
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()[:-1]]
    assert all(ocsf_problems(r) == [] for r in records), [ocsf_problems(r) for r in records]
    # Each SIEM record finds its row of the re-verifiable export by seq and hash.
    assert [(r["metadata"]["sequence"], r["metadata"]["uid"]) for r in records[:-1]] == \
        [(r["seq"], r["hash"]) for r in rows]
    deny = next(r for r in records if r["metadata"]["event_code"] == "policy_decision"
                and r["action"] == "Denied")
    assert deny["policy"]["name"] == "deny[0]" and deny["disposition"] == "Blocked"
    assert deny["api"]["request"]["data"]["command"] == "curl http://example.com"
    basis = next(r for r in records if r["metadata"]["event_code"] == "decision_basis")
    assert deny["policy"]["uid"] == basis["policy"]["uid"]  # the rules the decision was made under
    launch = next(r for r in records if r["class_uid"] == 1007)
    assert launch["process"]["cmd_line"] == "wc -l notes.txt" and launch["exit_code"] == 0
    assert launch["device"]["name"] == "abhed sandbox (bwrap)"
    created = next(r for r in records if r["class_uid"] == 1001 and r["activity_id"] == 1)
    assert created["file"]["hashes"][0]["value"] == \
        hashlib.sha256((ws / "notes.txt").read_bytes()).hexdigest()
    assert {r["unmapped"]["abhed"]["session_id"] for r in records[:-1]} == {session}
    model = next(r for r in records if r["metadata"]["event_code"] == "model_turn")
    assert model["ai_model"] == {"name": "scripted", "ai_provider": "local"}


def test_a_session_export_leaves_the_other_sessions_out(abhed: Cli, abhed_home: Path,
                                                       tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    first = _run_session(abhed, abhed_home, ws)
    _run_session(abhed, abhed_home, ws)
    out = tmp_path / "one.jsonl"
    done = abhed("events", "export", "--format", "ocsf", "--session", first, "--out", str(out))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["unmapped"]["abhed"]["session_id"] for r in records[:-1]} == {first}
    manifest = records[-1]["unmapped"]["abhed"]["manifest"]
    assert manifest["withheld"] == len(records) - 1  # the second session is as long as the first
    assert "left out" in done.stdout


@pytest.mark.parametrize("argv, message", [
    (["--format", "xml"], "'xml' is not one of 'jsonl', 'ocsf'"),
    (["--format", "ocsf", "--session", "s-nope"], "no session 's-nope'"),
])
def test_bad_export_requests_are_refused_with_the_reason(abhed: Cli, tmp_path: Path,
                                                         argv: list[str], message: str) -> None:
    out = tmp_path / "x.jsonl"
    done = abhed("events", "export", "--out", str(out), *argv)
    assert done.returncode != 0 and message in done.stderr
    assert not out.exists()


def test_a_mapper_refuses_nothing_it_is_given() -> None:
    """Hostile but valid events (any JSON as arguments) still make valid records."""
    mapper = OcsfMapper(log_name="/l")
    for args in (None, [], "str", 1.5, {"": {"": [None] * 10_000}}):
        event = ev.EVENT_ADAPTER.validate_python(
            {"type": "action", "session_id": "s", "call_id": "c", "tool": "t", "args": args})
        record = mapper.record(seq=1, session_seq=1, prev_hash="0" * 64, hash="1" * 64,
                               event=event)
        assert ocsf_problems(record) == []


def test_the_session_start_names_the_models_signature_identity(abhed: Cli, abhed_home: Path,
                                                                tmp_path: Path) -> None:
    """A provider served from a signed catalog model: the start says which key signed what."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from models import hash_weights, public_key_pem, sign_model

    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text("{}")
    files = hash_weights(model)
    key = ec.generate_private_key(ec.SECP256R1())
    (model / "model.sig").write_bytes(sign_model(model, name="tiny", key=key))
    (model / "model-signing.pub").write_bytes(public_key_pem(key))
    (tmp_path / "catalog.json").write_text(json.dumps({"models": [
        {"name": "tiny", "served_name": "scripted", "weights_dir": str(model), "files": files}]}))
    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedServer([{"text": "hello"}]) as server:
        (abhed_home / "config.json").write_text(json.dumps({
            "catalog": str(tmp_path / "catalog.json"),
            "custom_providers": [{"name": "local", "api": "openai", "base_url": server.base_url,
                                  "model": "scripted", "max_retries": 0,
                                  "catalog_entry": "tiny"}]}))
        done = abhed("run", "hi", "--workspace", str(ws))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "o.jsonl"
    assert abhed("events", "export", "--format", "ocsf", "--out", str(out)).returncode == 0
    started = json.loads(out.read_text().splitlines()[0])
    signature = started["policy"]["data"]["model_signature"]
    assert signature["key_sha256"] == hashlib.sha256(public_key_pem(key)).hexdigest()
    assert signature["signature_sha256"] == hashlib.sha256(
        (model / "model.sig").read_bytes()).hexdigest()
    assert ocsf_problems(started) == []
