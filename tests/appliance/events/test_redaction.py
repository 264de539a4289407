"""Canary tests: a planted secret the redaction rule covers is in none of events.db, its WAL,
the rpc stream, `abhed tool`'s output, kept artifacts or exports."""

from __future__ import annotations

import io
import json
from pathlib import Path

from appliance import events_db_path
from appliance.events import EventLogSettings, EventStore, Redactor
from appliance.events.maintenance import export_log
from appliance.sessions import ArtifactStore
from tests.appliance.events.logs import Cli

CANARY = "AKIAQWERTYUIOPASDFGH"
REDACT_KEYS = Path(__file__).resolve().parents[2] / "fixtures" / "extensions" / "redact_keys.sh"


def everything_durable(home: Path) -> dict[str, bytes]:
    """Every file under ABHED_HOME/state (the log, its WAL, artifacts), by name."""
    return {str(p): p.read_bytes() for p in (home / "state").rglob("*") if p.is_file()}


def session_of(stderr: str) -> str:
    return next(line.split()[-1] for line in stderr.splitlines() if line.startswith("session: "))


def test_configured_rule_keeps_the_canary_out_of_everything(abhed: Cli, abhed_home: Path,
                                                           workspace: Path, tmp_path: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps(
        {"events": {"redact": ["AKIA[A-Z0-9]{16}"]}}))
    cfg = workspace / "cfg.ini"
    cfg.write_text(f"key = {CANARY}\nregion = x\n")
    # Hold the log open, so the WAL keeps its frames for us to search.
    holder = EventStore(events_db_path())
    read = abhed("tool", "read", json.dumps({"path": str(cfg)}), "-w", str(workspace))
    assert read.returncode == 0 and "[redacted]" in read.stdout, read.stderr
    sid = session_of(read.stderr)
    calls = [
        ("edit", {"path": str(cfg), "old_string": "region = x", "new_string": "region = y"}),
        ("edit", {"path": str(cfg), "old_string": f"nothing {CANARY}", "new_string": "z"}),
        ("write", {"path": str(workspace / "new.txt"), "content": f"copy {CANARY}\n"}),
        ("glob", {"pattern": f"*{CANARY}*"}),
    ]
    outputs = [read.stdout]
    for tool, args in calls:
        done = abhed("tool", tool, json.dumps(args), "-w", str(workspace), "--session", sid,
                     "--yes")
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert CANARY in cfg.read_text()  # the workspace keeps its file: only the record is redacted
    assert all(CANARY not in out for out in outputs)
    durable = everything_durable(abhed_home)
    assert any(name.endswith("events.db-wal") and data for name, data in durable.items())
    assert [n for n, data in durable.items() if CANARY.encode() in data] == []
    out = tmp_path / "audit.jsonl"
    export_log(holder, out)
    assert CANARY not in out.read_text() and "[redacted]" in out.read_text()
    holder.close()


def test_a_redacting_extensions_rewrite_reaches_details_and_the_log(abhed: Cli, abhed_home: Path,
                                                                    workspace: Path) -> None:
    """The issue's case: the extension rewrites content; the edit's diff (details) had the key."""
    (abhed_home / "config.json").write_text(json.dumps({"extensions": [
        {"name": "redact", "command": "bash", "args": [str(REDACT_KEYS)]}]}))
    cfg = workspace / "cfg.ini"
    cfg.write_text(f"key = {CANARY}\nregion = x\n")
    read = abhed("tool", "read", json.dumps({"path": str(cfg)}), "-w", str(workspace), "--yes")
    assert read.returncode == 0, read.stderr
    edit = abhed("tool", "edit", json.dumps({"path": str(cfg), "old_string": "region = x",
                                             "new_string": "region = y"}),
                 "-w", str(workspace), "--session", session_of(read.stderr), "--yes")
    assert edit.returncode == 0, edit.stderr
    details = json.loads(edit.stdout.strip().splitlines()[-1])["details"]
    assert "key = [redacted]" in details["diff"]
    store = EventStore(events_db_path())
    bodies = "".join(r.body for r in store.rows())
    store.close()
    assert CANARY not in bodies and "key = [redacted]" in bodies


def test_the_rpc_stream_is_redacted_line_by_line(tmp_path: Path) -> None:
    from appliance.compose import Config
    from cli.rpc import RpcServer

    store = EventStore(tmp_path / "events.db", settings=EventLogSettings(redact=("AKIA[A-Z0-9]{16}",)))
    out = io.StringIO()
    server = RpcServer(Config(), store, io.BytesIO(b""), out)
    server.send({"type": "delta", "text": f"the key is {CANARY}"})
    server.send({"type": "approval_request", "args": {"command": f"echo {CANARY}"}})
    store.close()
    assert CANARY not in out.getvalue() and out.getvalue().count("[redacted]") == 2


def test_kept_outputs_are_redacted_and_secret_preimages_not_kept(tmp_path: Path) -> None:
    redactor = Redactor(["AKIA[A-Z0-9]{16}"])
    artifacts = ArtifactStore(tmp_path / "artifacts", "s-1", redact=redactor.text)
    spill = tmp_path / "spill"
    spill.write_bytes(f"line\n{CANARY}\n".encode() * 1000)
    kept = artifacts.keep(path=str(spill), kind="output")
    assert kept is not None
    assert CANARY.encode() not in (tmp_path / "artifacts" / "s-1" / kept["sha256"]).read_bytes()
    assert artifacts.keep(f"x = {CANARY}".encode(), kind="preimage", source="/w/f") is None
    assert artifacts.keep(b"no secret here", kind="preimage", source="/w/g") is not None


def test_learning_takes_out_only_what_the_rewrite_took_out() -> None:
    r = Redactor()
    before = f"1\tkey = {CANARY}\n2\tregion = x\n3\tother = AKIAZZZZZZZZZZZZZZZZ"
    r.learn(before, before.replace(CANARY, "[redacted]").replace("AKIAZZZZZZZZZZZZZZZZ",
                                                                 "[redacted]"))
    assert r.value({"diff": f"-key = {CANARY}", "n": [CANARY, 3]}) == {
        "diff": "-key = [redacted]", "n": ["[redacted]", 3]}
    assert r.text("region = x") == "region = x"
    r.learn("short a", "short b")  # a one-letter edit is not a secret: nothing learned from it
    assert r.text("a short a") == "a short a"


def test_a_redacted_event_is_validated_again_by_its_own_schema(tmp_path: Path) -> None:
    # append re-validates what redaction rewrote (by the event's class, not the whole union):
    # a kept secret is replaced, and a rewrite that breaks the event's schema is refused,
    # nothing written.
    import pytest
    from pydantic import ValidationError

    from appliance.events import StartupNotice, now_iso

    def notice(message: str) -> StartupNotice:
        return StartupNotice(session_id="s-1", kind="sandbox_fallback", subject="bwrap",
                             message=message)

    for name, redact in (("broken", ("^startup_notice$",)), ("kept", ("AKIA[A-Z0-9]{16}",))):
        store = EventStore(tmp_path / name / "events.db", settings=EventLogSettings(redact=redact))
        try:
            store.create_session("s-1", str(tmp_path), now_iso())
            if name == "broken":  # the rewrite turned the event's `type` into [redacted]
                with pytest.raises(ValidationError):
                    store.append(notice("x"))
                assert list(store.events("s-1")) == []
            else:
                stored = store.append(notice(f"k={CANARY}"))
                assert type(stored.event) is StartupNotice
                assert stored.event.message == "k=[redacted]"
                assert [e.event for e in store.events("s-1")] == [stored.event]
        finally:
            store.close()


def test_hostile_redact_settings_are_refused() -> None:
    import pytest
    from pydantic import ValidationError

    for bad in (["("], [""], [".*"], ["x" * 20_000]):
        with pytest.raises(ValidationError):
            EventLogSettings(redact=tuple(bad))


def test_what_redaction_learned_binds_the_sessions_later_processes(abhed: Cli, abhed_home: Path,
                                                                   workspace: Path) -> None:
    """Issue 23: the read in one `abhed tool` process taught the redactor the key; the edit in
    the next process kept a preimage holding it whole (`grep -r` found it under artifacts)."""
    (abhed_home / "config.json").write_text(json.dumps({"extensions": [
        {"name": "redact", "command": "bash", "args": [str(REDACT_KEYS)]}]}))
    cfg = workspace / "cfg.ini"
    cfg.write_text(f"key = {CANARY}\n" + "".join(f"line {n}\n" for n in range(40))
                   + "region = x\n")
    read = abhed("tool", "read", json.dumps({"path": str(cfg)}), "-w", str(workspace), "--yes")
    assert read.returncode == 0, read.stderr
    sid = session_of(read.stderr)
    # Far from the key: the edit's own result (and diff) never shows it to the extension.
    edit = abhed("tool", "edit", json.dumps({"path": str(cfg), "old_string": "region = x",
                                             "new_string": "region = y"}),
                 "-w", str(workspace), "--session", sid, "--yes")
    assert edit.returncode == 0, edit.stderr
    durable = everything_durable(abhed_home)
    assert [n for n, data in durable.items() if CANARY.encode() in data] == []
    # What binds the later process is a salted digest, never the key.
    remembered = (abhed_home / "state" / "redactions" / f"{sid}.json").read_text()
    assert CANARY not in remembered and '"length": 20, "kinds": "u"' in remembered


def test_remembered_passages_are_found_wherever_they_stand() -> None:
    from appliance.events import passage_record

    r = Redactor()
    r.remember("s", [passage_record("s", CANARY), passage_record("s", "pass word!é")])
    assert r.text(f"x={CANARY};y=x{CANARY}z") == "x=[redacted];y=x[redacted]z"
    assert r.text("the pass word!é here") == "the [redacted] here"
    assert r.text("AKIAQWERTYUIOPASDFGX") == "AKIAQWERTYUIOPASDFGX"  # one letter off: not it
    r.remember("s", [{"length": "x"}, {"sha256": 5}, "junk"])  # type: ignore[list-item]
    assert r.text(CANARY) == "[redacted]"  # damaged records are skipped, the rest still bind
