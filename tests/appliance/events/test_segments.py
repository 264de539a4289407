"""Rotation into segments, the chain across them, retention recorded, a missing segment named."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from appliance import Session, events_db_path
from appliance.events import EventLogSettings, EventStore, ObservationEvent
from appliance.events._segment_files import sealed_segments
from appliance.events.maintenance import verify_log
from tests.appliance.events.logs import Cli, fill
from tools import ToolResult

BIG = EventLogSettings(rotate_mb=1)


def grow(store: EventStore, session: Session, mib: int) -> None:
    for i in range(mib * 4):
        session.append(ObservationEvent(session_id=session.id, call_id=f"big{i}", tool="read",
                                        result=ToolResult(ok=True, content="y" * 262_144),
                                        duration_ms=1.0))


def test_a_segment_is_sealed_by_size_and_the_chain_and_sessions_continue() -> None:
    store = EventStore(events_db_path(), settings=BIG)
    session = Session.create(store, "/w", version="t")
    grow(store, session, 1)
    head = store.head()
    store.close()
    store = EventStore(events_db_path(), settings=BIG)  # the next door to open it rotates
    sealed = sealed_segments(events_db_path())
    assert [n for n, _ in sealed] == [1]
    assert oct(sealed[0][1].stat().st_mode & 0o777) == "0o400"
    first = next(store.events(types=("segment_started",))).event
    assert first.previous_head_seq == head[0] and first.previous_head_hash == head[1]
    again = Session.open(store, session.id)
    again.record_call("after", "glob", {}, "cli")
    mine = list(store.events(session.id))
    assert [e.session_seq for e in mine] == list(range(1, len(mine) + 1))  # no restart at 1
    assert store.session_info(session.id)["events"] == len(mine)
    report = verify_log(events_db_path())
    assert report.ok, report.problems
    assert [s["segment"] for s in report.segments] == [1, 2]
    assert store.verify()[0] == head[0] + 2


def test_rotation_waits_while_another_process_has_the_log_open() -> None:
    store = EventStore(events_db_path(), settings=BIG)
    grow(store, Session.create(store, "/w", version="t"), 1)
    other = EventStore(events_db_path(), settings=BIG)  # a second open: not rotated under it
    assert sealed_segments(events_db_path()) == []
    other.close()
    store.close()
    EventStore(events_db_path(), settings=BIG).close()
    assert len(sealed_segments(events_db_path())) == 1


def test_a_segment_is_sealed_by_age(monkeypatch: pytest.MonkeyPatch) -> None:
    fill().close()
    path = events_db_path()
    later = time.time() + 3 * 86400
    os.utime(path, (later - 86400 * 2.5, later - 86400 * 2.5))
    import appliance.events._store as store_module

    monkeypatch.setattr(store_module.time, "time", lambda: later)
    EventStore(path, settings=EventLogSettings(rotate_days=2)).close()
    monkeypatch.undo()
    assert len(sealed_segments(path)) == 1
    report = verify_log(path)
    assert report.ok and len(report.segments) == 2


def test_operator_rotation_and_verify_names_a_missing_segment(abhed: Cli) -> None:
    fill().close()
    for _ in range(2):
        done = abhed("events", "rotate")
        assert done.returncode == 0, done.stderr
    sealed = sealed_segments(events_db_path())
    assert len(sealed) == 2
    shutil.move(sealed[1][1], sealed[1][1].with_suffix(".gone"))  # deleted, not recorded
    done = abhed("events", "verify")
    assert done.returncode == 1
    assert "a segment is missing" in done.stderr and "no recorded deletion" in done.stderr


def test_prune_is_recorded_and_verify_accepts_and_reports_it(abhed: Cli) -> None:
    fill().close()
    abhed("events", "rotate")
    abhed("events", "rotate")
    done = abhed("events", "prune", "--keep", "1")
    assert done.returncode == 0 and "recorded" in done.stdout, done.stderr
    assert len(sealed_segments(events_db_path())) == 1
    after = abhed("events", "verify")
    assert after.returncode == 0, after.stderr
    assert "was deleted by" in after.stdout and "events 1..21" in after.stdout
    deleted = json.loads(abhed("events", "verify", "--json").stdout)["deletions"][0]
    assert deleted["first_seq"] == 1 and len(deleted["sha256"]) == 64


def test_an_altered_sealed_segment_is_named_and_repair_sends_you_to_the_backup(abhed: Cli) -> None:
    fill().close()
    abhed("events", "rotate")
    sealed = sealed_segments(events_db_path())[0][1]
    os.chmod(sealed, 0o600)
    conn = sqlite3.connect(sealed)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET body = replace(body, 'glob', 'bash') WHERE seq = 5")
    conn.executescript("CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
                       "BEGIN SELECT RAISE(ABORT, 'x'); END;")
    conn.close()
    done = abhed("events", "verify")
    assert done.returncode == 1 and "BROKEN at event 5" in done.stderr and sealed.name in done.stderr
    repair = abhed("events", "repair")
    assert repair.returncode == 1 and "sealed segment" in repair.stderr


def test_a_segment_from_another_log_does_not_continue_this_chain(abhed: Cli, tmp_path: Path) -> None:
    fill().close()
    abhed("events", "rotate")
    other = tmp_path / "other" / "events.db"
    fill(path=other).close()
    EventStore(other).rotate("operator")
    mine = sealed_segments(events_db_path())[0][1]
    os.replace(sealed_segments(other)[0][1], mine)
    done = abhed("events", "verify")
    assert done.returncode == 1 and "not the previous segment's head" in done.stderr
