"""Damage is detected, every door refuses it with one message, and repair survives it.

Real SQLite files, the real `abhed` binary: the operator's view of issue 17.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from appliance import events_db_path
from appliance._errors import EventLogDamaged, EventLogError
from appliance.events import EventStore
from appliance.events.maintenance import verify_log
from tests.appliance.events.logs import Cli, checkpoint, fill, flip, page_of, sha

PAGE = 4096
DAMAGE_SENTENCE = "is damaged"


def damaged_index_log() -> Path:
    """The issue's case: a flipped page header in the middle of the file (an index page)."""
    fill().close()
    path = events_db_path()
    checkpoint(path)
    flip(path, (page_of(path, "sqlite_autoindex_sessions_1") - 1) * PAGE)
    return path


def test_verify_reports_what_integrity_check_sees(abhed: Cli) -> None:
    path = damaged_index_log()
    before = sha(path)
    done = abhed("events", "verify")
    assert done.returncode == 1
    assert "DAMAGED" in done.stderr and "integrity_check" in done.stderr
    assert "Traceback" not in done.stderr
    as_json = json.loads(abhed("events", "verify", "--json").stdout)
    assert as_json["ok"] is False and as_json["problems"][0]["file"] == str(path)
    assert sha(path) == before  # verify changed nothing


DOORS = [
    ("tool", "glob", '{"pattern": "*"}'),
    ("sessions", "list"),
    ("events", "head"),
    ("events", "export", "--out", "x.jsonl"),
    ("run", "hello"),
]


@pytest.mark.parametrize("argv", DOORS, ids=lambda a: " ".join(a[:2]))
def test_every_door_refuses_a_damaged_log_with_one_message(abhed: Cli, argv: tuple[str, ...],
                                                           workspace: Path) -> None:
    path = damaged_index_log()
    before = sha(path)
    extra = ["-w", str(workspace)] if argv[0] in ("tool", "run") else []
    done = abhed(*argv, *extra)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count(DAMAGE_SENTENCE) == 1, done.stderr
    assert "abhed events repair" in done.stderr and "Nothing was changed" in done.stderr
    assert sha(path) == before


def test_rpc_refuses_a_damaged_log(abhed: Cli) -> None:
    path = damaged_index_log()
    done = abhed("rpc", stdin='{"id": 1, "method": "shutdown"}\n')
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert DAMAGE_SENTENCE in done.stderr and str(path) in done.stderr


def test_a_door_refuses_a_log_whose_triggers_were_dropped(abhed: Cli) -> None:
    fill().close()
    conn = sqlite3.connect(events_db_path())
    conn.execute("DROP TRIGGER events_no_update")
    conn.close()
    done = abhed("sessions", "list")
    assert done.returncode == 1 and "append-only trigger" in done.stderr


def test_a_door_refuses_a_log_whose_newest_event_was_altered(abhed: Cli, workspace: Path) -> None:
    fill().close()
    conn = sqlite3.connect(events_db_path())
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET body = replace(body, 'glob', 'bash') "
                 "WHERE seq = (SELECT MAX(seq) FROM events)")
    conn.executescript("CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
                       "BEGIN SELECT RAISE(ABORT, 'x'); END;")
    conn.close()
    done = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace))
    assert done.returncode == 1 and "does not match its hash" in done.stderr


def test_a_file_that_is_not_a_database_is_refused_not_replaced(abhed: Cli) -> None:
    path = events_db_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x00garbage" * 4096)
    done = abhed("sessions", "list")
    assert done.returncode == 1 and DAMAGE_SENTENCE in done.stderr
    assert path.read_bytes() == b"\x00garbage" * 4096


def test_a_body_unreadable_mid_log_is_a_message_not_a_traceback(abhed: Cli) -> None:
    store = fill()
    sid = store.sessions()[0]["id"]
    store.close()
    conn = sqlite3.connect(events_db_path())
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET body = '{not json' WHERE seq = 2")
    conn.executescript("CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
                       "BEGIN SELECT RAISE(ABORT, 'x'); END;")
    conn.close()
    done = abhed("sessions", "show", sid)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "damaged at event 2" in done.stderr


def test_the_store_raises_the_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    fill(path=path).close()
    checkpoint(path)
    flip(path, (page_of(path, "sqlite_autoindex_sessions_1") - 1) * PAGE)
    with pytest.raises(EventLogDamaged) as info:
        EventStore(path)
    assert info.value.path == str(path) and "quick_check" in info.value.what


# -- repair -------------------------------------------------------------------


def test_repair_after_index_damage_keeps_every_event(abhed: Cli, workspace: Path) -> None:
    path = damaged_index_log()
    damaged_sha = sha(path)
    total = verify_log(path).events
    done = abhed("events", "repair")
    assert done.returncode == 0, done.stderr
    assert f"kept {total} events" in done.stdout and "lost 0" in done.stdout
    evidence = next(path.parent.glob("events.damaged-*.db"))
    assert sha(evidence) == damaged_sha  # the evidence is the damaged file, byte for byte
    after = abhed("events", "verify")
    assert after.returncode == 0, after.stderr
    assert "repaired at event" in after.stdout and evidence.name in after.stdout
    report = verify_log(path)
    assert report.repairs[0]["damaged_sha256"] == damaged_sha
    # The repair is the first event of the new segment, and the log works again.
    first = sqlite3.connect(path).execute("SELECT type FROM events ORDER BY seq LIMIT 1").fetchone()
    assert first == ("log_repaired",)
    assert abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace)).returncode == 0
    assert verify_log(path).ok


def test_repair_after_damage_to_the_events_table_keeps_the_good_prefix(abhed: Cli) -> None:
    store = fill(sessions=6, calls=6)
    original = {r.seq: r.hash for r in store.rows()}
    store.close()
    path = events_db_path()
    checkpoint(path)
    noted = verify_log(path)
    leaf = page_of(path, "events", last=True)
    flip(path, (leaf - 1) * PAGE, count=8)  # the newest events' leaf page is unreadable
    assert not verify_log(path).ok
    done = abhed("events", "repair")
    assert done.returncode == 0, done.stderr
    report = verify_log(path)
    assert report.ok, report.problems
    repair = report.repairs[0]
    assert 0 < repair["last_good_seq"] < noted.head_seq
    # Nothing beyond the damaged leaf was readable, so the repair cannot count what it held:
    # it says so, and the head the auditor noted shows how far the log reached.
    assert repair["highest_seq_seen"] == repair["last_good_seq"]
    assert "compare with a head you noted" in done.stdout
    assert repair["method"] in ("rowid", "sqlite-recover")
    # Every event up to the last good one is kept, with the hash it had.
    kept = EventStore(path)
    hashes = {r.seq: r.hash for r in kept.rows()}
    assert all(hashes[s] == original[s] for s in range(1, repair["last_good_seq"] + 1))


def test_repair_of_an_intact_log_changes_nothing(abhed: Cli) -> None:
    fill().close()
    before = sha(events_db_path())
    done = abhed("events", "repair")
    assert done.returncode == 1 and "nothing to repair" in done.stderr
    assert sha(events_db_path()) == before


def test_repair_refuses_while_the_log_is_open(abhed: Cli) -> None:
    path = damaged_index_log()
    import fcntl
    import os

    from appliance.events._segment_files import lock_path

    fd = os.open(lock_path(path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        done = abhed("events", "repair")
    finally:
        os.close(fd)
    assert done.returncode == 1 and "another process has the log open" in done.stderr


def test_a_missing_active_segment_continues_the_chain_not_a_fresh_log(abhed: Cli, workspace: Path) -> None:
    store = fill()
    store.rotate("operator")
    head = store.head()
    store.close()
    path = events_db_path()
    path.unlink()
    for side in ("-wal", "-shm"):
        path.with_name(path.name + side).unlink(missing_ok=True)
    assert abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace)).returncode == 0
    report = verify_log(path)
    assert report.ok, report.problems
    assert report.head_seq > head[0]
    first = sqlite3.connect(path).execute("SELECT body FROM events ORDER BY seq LIMIT 1").fetchone()
    assert json.loads(first[0])["reason"] == "continued"


def test_a_log_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o777)  # anyone could swap events.db for another file
    with pytest.raises(EventLogError, match="writable by other users"):
        EventStore(state / "events.db")
    os.chmod(state, 0o1777)  # sticky, like /tmp: others cannot replace our files
    EventStore(state / "events.db").close()


def test_a_deleted_log_is_refused_not_silently_replaced_by_a_fresh_one(abhed: Cli,
                                                                       workspace: Path) -> None:
    fill().close()
    path = events_db_path()
    for name in (path, path.with_name("events.db-wal"), path.with_name("events.db-shm")):
        name.unlink(missing_ok=True)
    done = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace))
    assert done.returncode == 1 and "the file is missing, though a log was kept here" in done.stderr
    assert not path.exists()  # no fresh log was started over the history
    path.with_name("events.db.lock").unlink()  # the operator means it: start afresh
    assert abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace)).returncode == 0
