"""Export: JSONL + manifest that an auditor's own script re-verifies without Abhed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from appliance import Session, events_db_path
from appliance.events import EventStore
from appliance.events.maintenance import export_log, verify_export
from tests.appliance.events.auditor import auditor_verify
from tests.appliance.events.logs import Cli, fill


def test_an_export_verifies_with_the_auditors_own_script(abhed: Cli, tmp_path: Path) -> None:
    fill().close()
    out = tmp_path / "audit.jsonl"
    done = abhed("events", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    head = EventStore(events_db_path()).head()
    assert auditor_verify(out) == head
    manifest = json.loads(out.read_text().splitlines()[-1])["manifest"]
    assert manifest["complete"] is True and manifest["first_prev_hash"] == "0" * 64
    ok = abhed("events", "verify", "--file", str(out))
    assert ok.returncode == 0 and f"last hash {head[1]}" in ok.stdout


def test_two_exports_are_consistent_and_a_rewrite_between_them_is_caught(abhed: Cli,
                                                                         tmp_path: Path) -> None:
    store = fill()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    export_log(store, first)
    Session.create(store, "/w", version="t").record_call("c", "glob", {}, "cli")
    export_log(store, second)
    done = abhed("events", "verify", "--file", str(first), "--file", str(second))
    assert done.returncode == 0 and "consistent" in done.stdout, done.stderr
    # An export of a rewritten history: same length, one body changed and the chain rehashed.
    forged = tmp_path / "forged.jsonl"
    forged.write_text(_rehashed(first, change_seq=3))
    assert verify_export(forged).ok  # a consistent chain on its own ...
    bad = abhed("events", "verify", "--file", str(forged), "--file", str(second))
    assert bad.returncode == 1 and "disagree at event 3" in bad.stderr  # ... but not with b


def _rehashed(path: Path, change_seq: int) -> str:
    from appliance.events._schema import chain_hash

    lines = path.read_text().splitlines()
    out: list[str] = []
    prev = "0" * 64
    last: dict[str, Any] = {}
    for line in lines[:-1]:
        e = json.loads(line)
        if e["seq"] == change_seq:
            e["body"] = e["body"].replace('"glob"', '"bash"')
        e["prev_hash"] = prev
        e["hash"] = chain_hash(e["seq"], e["session_id"], e["session_seq"], e["type"], e["ts"],
                               e["body"], prev)
        prev = e["hash"]
        last = e
        out.append(json.dumps(e))
    manifest = json.loads(lines[-1])
    manifest["manifest"].update(last_hash=last["hash"], head_hash=last["hash"])
    out.append(json.dumps(manifest))
    return "\n".join(out) + "\n"


def test_a_session_export_withholds_the_others_but_keeps_the_chain(abhed: Cli,
                                                                  tmp_path: Path) -> None:
    store = fill(sessions=3)
    sid = store.sessions()[1]["id"]
    out = tmp_path / "one.jsonl"
    manifest = export_log(store, out, session=sid)
    lines = [json.loads(line) for line in out.read_text().splitlines()[:-1]]
    assert {e["session_id"] for e in lines if not e.get("withheld")} == {sid}
    assert all(set(e) == {"seq", "withheld", "prev_hash", "hash"} for e in lines if e.get("withheld"))
    assert manifest["complete"] is False and manifest["events"] == 7
    assert auditor_verify(out)[0] == store.head()[0]
    assert abhed("events", "verify", "--file", str(out)).returncode == 0


def test_since_exports_a_contiguous_tail(tmp_path: Path) -> None:
    store = fill(sessions=2)
    rows = list(store.rows())
    out = tmp_path / "tail.jsonl"
    manifest = export_log(store, out, since=rows[5].ts)
    assert manifest["first_seq"] == 6 and manifest["first_prev_hash"] == rows[4].hash
    assert verify_export(out).ok


@pytest.mark.parametrize("damage", ["cut", "edit", "drop", "garbage", "no-manifest", "huge", "empty"])
def test_a_damaged_or_hostile_export_is_named_not_crashed_on(tmp_path: Path, damage: str) -> None:
    store = fill()
    out = tmp_path / "x.jsonl"
    export_log(store, out)
    text = out.read_text()
    lines = text.splitlines(keepends=True)
    if damage == "cut":
        text = text[: len(text) // 2]
    elif damage == "edit":
        text = text.replace("glob", "bash", 1)
    elif damage == "drop":
        text = "".join(lines[:3] + lines[4:])
    elif damage == "garbage":
        text = "".join(lines[:2]) + "[1, 2]\n" + "".join(lines[2:])
    elif damage == "no-manifest":
        text = "".join(lines[:-1])
    elif damage == "huge":
        text = "".join(lines[:2]) + '{"seq": 3, "body": "' + "x" * (1 << 20) + "\n"
    elif damage == "empty":
        text = ""
    out.write_text(text)
    check = verify_export(out)
    assert not check.ok and check.problems


def test_export_refuses_a_log_that_does_not_verify(abhed: Cli, tmp_path: Path) -> None:
    import sqlite3

    fill().close()
    conn = sqlite3.connect(events_db_path())
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET body = replace(body, 'glob', 'bash') WHERE seq = 3")
    conn.executescript("CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
                       "BEGIN SELECT RAISE(ABORT, 'x'); END;")
    conn.close()
    done = abhed("events", "export", "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 1 and "event 3" in done.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_export_of_an_unknown_session_is_refused(abhed: Cli, tmp_path: Path) -> None:
    fill().close()
    done = abhed("events", "export", "--session", "s-nope", "--out", str(tmp_path / "x"))
    assert done.returncode == 1 and "no session" in done.stderr


def test_verify_file_refuses_a_fifo_a_directory_and_binary_at_once(abhed: Cli, tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00" * 1000)
    for target, rc, expect in ((fifo, 1, "not a regular file"), (tmp_path, 2, "is a directory"),
                               (binary, 1, "not an Abhed export"),
                               (tmp_path / "absent", 1, "cannot read")):
        done = abhed("events", "verify", "--file", str(target), timeout=60)
        assert done.returncode == rc and expect in done.stderr, (target, done.stderr)
        assert "Traceback" not in done.stderr


def test_export_to_an_unwritable_place_is_a_message(abhed: Cli, tmp_path: Path) -> None:
    fill().close()
    done = abhed("events", "export", "--out", str(tmp_path / "no" / "such" / "dir" / "x.jsonl"))
    assert done.returncode == 1 and "cannot write" in done.stderr and "Traceback" not in done.stderr
