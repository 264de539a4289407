"""Reproducible decisions: every policy_decision names the copy of the rules it was made under."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.appliance.events.logs import Cli


def events_of(abhed: Cli, sid: str) -> list[dict[str, Any]]:
    done = abhed("sessions", "show", sid, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def replay_digest(basis: dict[str, Any]) -> str:
    """What an auditor computes from the copy: sha256 of its canonical JSON."""
    copy = {k: basis[k] for k in ("policy", "extensions", "mcp_pins", "tools")}
    text = json.dumps(copy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def session_of(stderr: str) -> str:
    return next(line.split()[-1] for line in stderr.splitlines() if line.startswith("session: "))


def test_a_decision_is_resolvable_after_the_config_changed(abhed: Cli, abhed_home: Path,
                                                           workspace: Path) -> None:
    config = abhed_home / "config.json"
    config.write_text(json.dumps({"policy": {"mode": "auto", "deny": [
        {"tool": "write", "reason": "no writes today"}]}}))
    target = json.dumps({"path": str(workspace / "x.txt"), "content": "x"})
    first = abhed("tool", "write", target, "-w", str(workspace))
    assert first.returncode == 0 and '"policy_denied"' in first.stdout, first.stderr
    sid = session_of(first.stderr)
    # The operator changes the rules; the same session resumes under the new ones.
    config.write_text(json.dumps({"policy": {"mode": "auto", "deny": [
        {"tool": "glob", "reason": "no globbing"}, {"tool": "write", "reason": "still no"}]}}))
    second = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace), "--session", sid)
    assert second.returncode == 0, second.stderr
    events = events_of(abhed, sid)
    bases = {e["digest"]: e for e in events if e["type"] == "decision_basis"}
    decisions = [e for e in events if e["type"] == "policy_decision"]
    assert len(bases) == 2 and len(decisions) == 2
    for d in decisions:
        basis = bases[d["basis_digest"]]  # every decision names a recorded copy ...
        assert replay_digest(basis) == d["basis_digest"]  # ... that an auditor can check
        index = int(d["decided_by"].removeprefix("deny[").removesuffix("]"))
        assert basis["policy"]["deny"][index]["tool"] == d["tool"]  # and resolve deny[N] in
    assert decisions[0]["decided_by"] == "deny[0]" and decisions[1]["decided_by"] == "deny[0]"
    assert decisions[0]["basis_digest"] != decisions[1]["basis_digest"]
    basis = bases[decisions[1]["basis_digest"]]
    assert set(basis["tools"]) >= {"read", "write", "edit", "glob", "grep", "bash"}
    assert basis["policy"]["mode"] == "auto"


def test_the_basis_is_recorded_once_while_it_does_not_change(abhed: Cli, workspace: Path) -> None:
    first = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace))
    sid = session_of(first.stderr)
    for _ in range(2):
        assert abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace), "--session",
                     sid).returncode == 0
    events = events_of(abhed, sid)
    assert [e["type"] for e in events][:2] == ["session_started", "decision_basis"]
    assert sum(e["type"] == "decision_basis" for e in events) == 1


def test_extension_env_values_stay_out_of_the_copy(abhed: Cli, abhed_home: Path,
                                                   workspace: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps({"extensions": [
        {"name": "quiet", "command": "cat", "env": {"API_TOKEN": "s3cret-token-value"}}]}))
    done = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace), "--yes")
    basis = next(e for e in events_of(abhed, session_of(done.stderr))
                 if e["type"] == "decision_basis")
    assert basis["extensions"][0]["env"] == ["API_TOKEN"]
    assert "s3cret-token-value" not in json.dumps(basis)
