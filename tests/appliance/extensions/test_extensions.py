"""Extensions: the specification's shell examples verbatim, veto-only combination, hostile ones."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance import events_db_path
from appliance.events import EventStore, ExtensionDied, ExtensionLog, PolicyDecision
from appliance.extensions import DuplicateTool, ExtensionHost, ExtensionSpec, Reply
from appliance.policy import HookVerdict
from tests.appliance.helpers import tooling
from tools import ToolResult, native_tools

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "extensions"
HOSTILE = str(HERE / "hostile.py")


def seed(name: str, script: str, **kw: Any) -> ExtensionSpec:
    return ExtensionSpec(name=name, command="bash", args=[str(HERE / script)], **kw)


def hostile(name: str, mode: str, log: Path | None = None, **kw: Any) -> ExtensionSpec:
    args = [HOSTILE, mode] + ([str(log)] if log else [])
    return ExtensionSpec(name=name, command=sys.executable, args=args, **kw)


class Rig:
    """A real session, event store, extension host and gated dispatcher, built by ``open_tooling``."""

    def __init__(self, workspace: Path, specs: list[ExtensionSpec], policy: dict[str, Any] | None = None,
                 approver: Any = None) -> None:
        self.store = EventStore(events_db_path())
        self.tooling = tooling(self.store, workspace, approver=approver, extensions=specs,
                               policy=policy or {"mode": "auto"})
        self.dispatcher = self.tooling.dispatcher
        self.session = self.dispatcher.session
        self.tools = self.tooling.tools
        assert self.tooling.host is not None
        self.host = self.tooling.host

    def call(self, tool: str, args: dict[str, Any]) -> ToolResult:
        return self.dispatcher.call(tool, args)

    def events(self, kind: type) -> list[Any]:
        return [e.event for e in self.store.events(self.session.id) if isinstance(e.event, kind)]

    def close(self) -> None:
        self.tooling.close()
        self.store.close()


@pytest.fixture
def rigs() -> Iterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for r in made:
        r.close()


def rig(rigs: list[Rig], workspace: Path, specs: list[ExtensionSpec], **kw: Any) -> Rig:
    r = Rig(workspace, specs, **kw)
    rigs.append(r)
    return r


# -- the specification's three examples, unchanged, with bash and jq -----------

def test_seed_guard_blocks_reads_of_matching_paths(workspace: Path, rigs: list[Rig]) -> None:
    (workspace / "secret.txt").write_text("hunter2\n")
    (workspace / "notes.txt").write_text("fine\n")
    r = rig(rigs, workspace, [seed("guard", "block_secrets.sh", events=["tool_call"])])
    refused = r.call("read", {"path": str(workspace / "secret.txt")})
    assert not refused.ok and refused.error is not None and refused.error.code == "policy_denied"
    assert "secrets are off limits" in refused.content and "hunter2" not in refused.content
    assert r.call("read", {"path": str(workspace / "notes.txt")}).ok
    decisions = r.events(PolicyDecision)
    assert [(d.verdict, d.decided_by) for d in decisions] == [("deny", "extension:guard"),
                                                              ("allow", "mode:auto")]


def test_seed_guard_sees_the_resolved_path_not_the_spelling(workspace: Path,
                                                                    rigs: list[Rig]) -> None:
    (workspace / "secret.txt").write_text("hunter2\n")
    (workspace / "innocent").symlink_to(workspace / "secret.txt")
    r = rig(rigs, workspace, [seed("guard", "block_secrets.sh")])
    result = r.call("read", {"path": str(workspace / "innocent")})
    assert not result.ok and "secrets are off limits" in result.content


def test_seed_redact_keys_rewrites_results(workspace: Path, rigs: list[Rig]) -> None:
    (workspace / "cfg.ini").write_text("key = AKIAABCDEFGHIJKLMNOP\nregion = x\n")
    r = rig(rigs, workspace, [seed("redact", "redact_keys.sh")])
    result = r.call("read", {"path": str(workspace / "cfg.ini")})
    assert result.ok
    assert "AKIAABCDEFGHIJKLMNOP" not in result.content and "[redacted]" in result.content
    assert "region = x" in result.content
    # ...and what the model was given is what the log holds
    stored = [e.event for e in r.store.events(r.session.id, types=("observation",))]
    assert "[redacted]" in stored[-1].result.content  # type: ignore[union-attr]


def test_seed_ticket_tool_is_provided_and_runs_through_dispatch(
        workspace: Path, rigs: list[Rig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fetch = bin_dir / "fetch-ticket"
    fetch.write_text("#!/bin/bash\necho \"ticket $1: printer on fire\"\n")
    fetch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    r = rig(rigs, workspace, [seed("tickets", "ticket_tool.sh")], policy={"mode": "ask"})
    tool = r.tools["ticket"]
    assert tool.mutates is False and tool.spec()["function"]["parameters"]["properties"] == {
        "id": {"type": "string"}}
    result = r.call("ticket", {"id": "T-42"})
    assert result.ok and result.content == "ticket T-42: printer on fire"
    bad = r.call("ticket", {"id": 42})
    assert not bad.ok and bad.error is not None and bad.error.code == "invalid_arguments"
    assert [d.decided_by for d in r.events(PolicyDecision)] == ["mode:ask"]


def test_a_deny_rule_naming_a_provided_tool_wins(workspace: Path, rigs: list[Rig]) -> None:
    r = rig(rigs, workspace, [seed("tickets", "ticket_tool.sh")],
            policy={"mode": "auto", "deny": [{"tool": "ticket", "reason": "not today"}]})
    result = r.call("ticket", {"id": "1"})
    assert not result.ok and "not today" in result.content


# -- no reply can allow ----------------------------------------------------------

def test_no_reply_can_allow_a_call_a_deny_rule_refuses(workspace: Path, rigs: list[Rig]) -> None:
    (workspace / "a.txt").write_text("x\n")
    r = rig(rigs, workspace, [hostile("permissive", "allow")],
            policy={"mode": "auto", "deny": [{"tool": "read"}]})
    result = r.call("read", {"path": str(workspace / "a.txt")})
    assert not result.ok and result.error is not None and result.error.code == "policy_denied"
    notes = r.events(ExtensionLog)
    assert notes and notes[0].kind == "ignored" and "allow" in notes[0].message
    assert not r.host.dead()  # ignored, logged, not killed: it said nothing stricter


def test_no_reply_can_allow_a_call_that_asks_with_nobody_to_answer(workspace: Path,
                                                                    rigs: list[Rig]) -> None:
    r = rig(rigs, workspace, [hostile("permissive", "allow")], policy={"mode": "ask"})
    result = r.call("write", {"path": str(workspace / "new.txt"), "content": "x"})
    assert not result.ok and result.error is not None
    assert result.error.code == "approval_unavailable" and "nobody can answer" in result.content
    assert not (workspace / "new.txt").exists()


def test_the_reply_types_cannot_express_allow() -> None:
    assert not any("allow" in f or "permit" in f or "approve" in f for f in Reply.__dataclass_fields__)
    assert not any("allow" in f for f in HookVerdict.__dataclass_fields__)


# -- load order cannot change a verdict --------------------------------------------

def test_permutations_of_load_order_give_the_same_verdicts(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    (workspace / "secret.txt").write_text("s\n")
    specs = [hostile("asker", "ask"), hostile("blocker", "block"), seed("guard", "block_secrets.sh")]
    outcomes = set()
    for order in itertools.permutations(specs):
        host = ExtensionHost(list(order))
        try:
            v1 = host.tool_call("c1", "read", {"path": str(workspace / "a.txt")})
            v2 = host.tool_call("c2", "read", {"path": str(workspace / "secret.txt")})
        finally:
            host.close()
        outcomes.add((v1, v2))
    assert len(outcomes) == 1
    (v1, v2), = outcomes
    assert v1.block and not v1.ask and v1.by == ("asker", "blocker")
    assert v2.by == ("asker", "blocker", "guard") and "secrets are off limits" in " ".join(v2.reasons)


def test_ask_plus_silence_is_ask_and_block_beats_ask(workspace: Path) -> None:
    for specs, want in (([hostile("a", "ask"), hostile("q", "silent")], (False, True)),
                        ([hostile("q", "silent"), hostile("a", "ask")], (False, True)),
                        ([hostile("b", "block"), hostile("a", "ask")], (True, False)),
                        ([hostile("a", "ask"), hostile("b", "block")], (True, False))):
        host = ExtensionHost(specs)
        try:
            v = host.tool_call("c", "bash", {"command": "ls"})
        finally:
            host.close()
        assert (v.block, v.ask) == want


# -- hostile extensions: no opinion, marked dead, never retried -------------------

@pytest.mark.parametrize("mode, why", [
    ("flood", "larger than"),
    ("many_lines", "more than once"),
    ("bad_utf8", "invalid UTF-8"),
    ("twice", "more than once"),
    ("crash", "exit code 3"),
    ("nonsense", "nonsense"),
    ("not_json", "not JSON"),
    ("array", "not an object"),
    ("hang", "timeout_ms=400"),
])
def test_hostile_extension_is_marked_dead_and_the_session_goes_on(
        mode: str, why: str, workspace: Path, rigs: list[Rig], tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    seen = tmp_path / "requests.log"
    r = rig(rigs, workspace, [hostile("bad", mode, seen, timeout_ms=400)])
    path = str(workspace / "a.txt")
    results = [r.call("read", {"path": path}) for _ in range(3)]
    assert all(x.ok for x in results), [x.content for x in results]
    died = r.events(ExtensionDied)
    assert len(died) == 1 and died[0].extension == "bad" and why in died[0].reason, died
    assert "bad" in r.host.dead()
    calls_seen = [json.loads(x) for x in seen.read_text().splitlines() if '"tool_call"' in x]
    # it saw the call it died on (and, for "answers twice", the one that exposed it); never more
    assert 1 <= len(calls_seen) <= 2


def test_a_blocking_extension_that_answers_twice_still_counts_its_first_answer(
        workspace: Path, rigs: list[Rig]) -> None:
    host = ExtensionHost([hostile("b", "block")])
    try:
        assert host.tool_call("c", "bash", {"command": "ls"}).block
    finally:
        host.close()


def test_missing_program_is_dead_at_startup(workspace: Path, rigs: list[Rig]) -> None:
    r = rig(rigs, workspace, [ExtensionSpec(name="ghost", command="/nonexistent/ext")])
    (workspace / "a.txt").write_text("x\n")
    assert r.call("read", {"path": str(workspace / "a.txt")}).ok
    assert "could not start" in r.events(ExtensionDied)[0].reason


# -- rewrites are validated and judged again ----------------------------------------

def test_rewritten_arguments_are_validated_again(workspace: Path, rigs: list[Rig]) -> None:
    (workspace / "a.txt").write_text("x\n")
    r = rig(rigs, workspace, [hostile("mover", "rewrite_outside")])
    result = r.call("read", {"path": str(workspace / "a.txt")})
    assert not result.ok and result.error is not None
    assert result.error.code == "extension_rewrite_invalid" and "mover" in result.content


def test_rewritten_arguments_go_through_policy_again(workspace: Path, rigs: list[Rig]) -> None:
    (workspace / "a.txt").write_text("x\n")
    (workspace / "secret.txt").write_text("s\n")
    r = rig(rigs, workspace, [hostile("mover", "rewrite_to_secret")],
            policy={"mode": "auto", "deny": [{"tool": "read", "path": "secret.txt"}]})
    result = r.call("read", {"path": str(workspace / "a.txt")})
    assert not result.ok and "deny[0]" in result.content


# -- provided tools: strict defaults -------------------------------------------------

def _lister(tmp_path: Path, name: str, tools: list[dict[str, Any]]) -> ExtensionSpec:
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import json, sys\n"
        f"TOOLS = {json.dumps({'tools': tools})!r}\n"
        "for line in sys.stdin:\n"
        "    ev = json.loads(line)['event']\n"
        "    print(TOOLS if ev == 'list_tools' else json.dumps({'result': 'done'}) "
        "if ev == 'invoke_tool' else '{}', flush=True)\n")
    return ExtensionSpec(name=name, command=sys.executable, args=[str(script)])


def test_duplicate_tool_names_are_refused_naming_both_sources(tmp_path: Path) -> None:
    host = ExtensionHost([_lister(tmp_path, "one", [{"name": "read"}])])
    try:
        with pytest.raises(DuplicateTool, match="extension 'one'.*'read'.*built-in"):
            host.list_tools(native_tools())
    finally:
        host.close()
    host = ExtensionHost([_lister(tmp_path, "one", [{"name": "deploy"}]),
                          _lister(tmp_path, "two", [{"name": "deploy"}])])
    try:
        with pytest.raises(DuplicateTool, match="extension 'two'.*'deploy'.*extension 'one'"):
            host.list_tools(native_tools())
    finally:
        host.close()


def test_a_provided_tool_that_does_not_say_is_treated_as_mutating(
        workspace: Path, rigs: list[Rig], tmp_path: Path) -> None:
    r = rig(rigs, workspace, [_lister(tmp_path, "ops", [
        {"name": "deploy", "description": "Deploy"},
        {"name": "status", "mutates": False},
        {"name": "weird", "mutates": "no"},
        {"name": "bad name!"}])], policy={"mode": "ask"})
    assert r.tools["deploy"].mutates and r.tools["weird"].mutates and not r.tools["status"].mutates
    assert "bad name!" not in r.tools
    assert r.call("status", {}).ok
    asked = r.call("deploy", {})
    assert not asked.ok and asked.error is not None and asked.error.code == "approval_unavailable"


def test_capabilities_refuse_provided_tools_outside_the_grant(workspace: Path, rigs: list[Rig],
                                                               tmp_path: Path) -> None:
    r = rig(rigs, workspace, [_lister(tmp_path, "ops", [{"name": "status", "mutates": False}])],
            policy={"mode": "auto", "capabilities": ["fs:read"]})
    result = r.call("status", {})
    assert not result.ok and "extension" in result.content and "capabilit" in result.content


# -- the other events ------------------------------------------------------------------

def test_before_send_drops_and_system_prompt_appends(tmp_path: Path) -> None:
    script = tmp_path / "ext.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    if r['event'] == 'before_send':\n"
        "        print(json.dumps({'drop': [m['index'] for m in r['messages'] if 'DROPME' in "
        "(m['content'] or '')]}), flush=True)\n"
        "    elif r['event'] == 'system_prompt':\n"
        "        print(json.dumps({'append': 'Never touch prod.', 'log': 'added a line'}), flush=True)\n"
        "    else:\n        print('{}', flush=True)\n")
    host = ExtensionHost([ExtensionSpec(name="e", command=sys.executable, args=[str(script)])])
    try:
        assert host.system_prompt("Base.") == "Base.\n\nNever touch prod."
        msgs = [{"role": "system", "content": "DROPME sys"}, {"role": "user", "content": "hi"},
                {"role": "user", "content": "DROPME"}, {"role": "assistant", "content": "ok"}]
        kept = host.before_send(msgs)
        assert [m["content"] for m in kept] == ["DROPME sys", "hi", "ok"]
        kinds = [(e.kind, e.event) for e in host.events if isinstance(e, ExtensionLog)]
        assert ("log", "system_prompt") in kinds and ("ignored", "before_send") in kinds
    finally:
        host.close()


def test_config_refuses_unknown_events_and_duplicate_names() -> None:
    from appliance.compose import Config

    with pytest.raises(ValueError, match="unknown events"):
        ExtensionSpec(name="x", command="x", events=["tool_cal"])
    with pytest.raises(ValueError, match="repeated: x"):
        Config.model_validate({"extensions": [{"name": "x", "command": "a"},
                                              {"name": "x", "command": "b"}]})
