"""The event log: persisted before results return, append-only, tamper-evident."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from appliance import (
    ChainBroken,
    Dispatcher,
    EventLogError,
    Session,
    SessionNotFound,
    events_db_path,
)
from appliance.events import (
    EVENT_ADAPTER,
    ActionEvent,
    EventStore,
    ObservationEvent,
    SessionStarted,
)
from appliance.events._schema import SCHEMA
from tests.appliance.helpers import tooling
from tools import ToolResult


def make_session(workspace: Path) -> tuple[EventStore, Session, Dispatcher]:
    store = EventStore(events_db_path())
    dispatcher = tooling(store, workspace, policy={"mode": "auto"}).dispatcher
    return store, dispatcher.session, dispatcher


def three_globs(workspace: Path) -> EventStore:
    """A log whose session ran glob three times: the chain the tamper tests break."""
    store, _, dispatch = make_session(workspace)
    for _ in range(3):
        dispatch.call("glob", {"pattern": "*"})
    return store


def broken(store: EventStore) -> ChainBroken:
    """What ``verify`` refuses the log with (it must refuse it)."""
    with pytest.raises(ChainBroken) as info:
        store.verify()
    return info.value


def raw(store: EventStore) -> sqlite3.Connection:
    """A plain connection that, like an attacker with the file, drops the guard triggers."""
    conn = sqlite3.connect(store.path, isolation_level=None)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("DROP TRIGGER events_no_delete")
    return conn


def test_every_call_is_an_action_then_an_observation_persisted(workspace: Path) -> None:
    (workspace / "a.txt").write_text("hi\n")
    store, session, dispatch = make_session(workspace)
    result = dispatch.call("read", {"path": str(workspace / "a.txt")}, call_id="c-1")
    assert result.ok
    # A second connection sees both events: they were committed before call() returned.
    other = EventStore(store.path)
    kinds = [(e.event.type, getattr(e.event, "call_id", None)) for e in other.events(session.id)]
    assert kinds == [("session_started", None), ("decision_basis", None), ("action", "c-1"),
                     ("policy_decision", "c-1"), ("observation", "c-1")]
    obs = list(other.events(session.id, types=("observation",)))[0].event
    assert isinstance(obs, ObservationEvent)
    assert obs.result == result


def test_refused_calls_are_recorded_too(workspace: Path) -> None:
    store, session, dispatch = make_session(workspace)
    bad = dispatch.call("read", {"path": "relative.txt"})
    unknown = dispatch.call("frobnicate", {"x": 1})
    malformed = dispatch.call("read", "{not json")
    assert not bad.ok and bad.error and bad.error.code == "relative_path"
    assert not unknown.ok and unknown.error and unknown.error.code == "unknown_tool"
    assert "read" in unknown.content and "write" in unknown.content
    assert not malformed.ok and malformed.error and malformed.error.code == "invalid_arguments"
    actions = [e.event for e in store.events(session.id, types=("action",))]
    assert [a.tool for a in actions if isinstance(a, ActionEvent)] == ["read", "frobnicate", "read"]
    assert isinstance(actions[2], ActionEvent) and actions[2].args == "{not json"


def test_unserialisable_args_are_recorded_as_their_repr(workspace: Path) -> None:
    store, session, dispatch = make_session(workspace)
    result = dispatch.call("read", {"path": object()})
    assert not result.ok
    action = [e.event for e in store.events(session.id, types=("action",))][0]
    assert isinstance(action, ActionEvent) and isinstance(action.args, str)


def test_verify_passes_on_an_intact_log(workspace: Path) -> None:
    store, _, dispatch = make_session(workspace)
    for i in range(5):
        dispatch.call("glob", {"pattern": f"*{i}"})
    count, head = store.verify()
    assert count == 17  # session_started, decision_basis + 5 x (action, policy_decision, observation)
    assert head == store.head()[1]


@pytest.mark.parametrize("column", ["body", "ts", "type", "session_id", "prev_hash", "hash"])
def test_verify_names_an_altered_event(workspace: Path, column: str) -> None:
    store = three_globs(workspace)
    conn = raw(store)
    if column == "body":
        body = json.loads(conn.execute("SELECT body FROM events WHERE seq = 4").fetchone()[0])
        body["tool"] = "write"
        conn.execute("UPDATE events SET body = ? WHERE seq = 4",
                     (json.dumps(body, sort_keys=True, separators=(",", ":")),))
    elif column in ("prev_hash", "hash"):
        conn.execute(f"UPDATE events SET {column} = ? WHERE seq = 4", ("f" * 64,))
    else:
        conn.execute(f"UPDATE events SET {column} = 'x' WHERE seq = 4")
    assert broken(store).seq == 4


def test_verify_catches_an_event_altered_and_rehashed(workspace: Path) -> None:
    """Recomputing the altered row's own hash is not enough: the next row's link breaks."""
    from appliance.events._schema import chain_hash

    store = three_globs(workspace)
    conn = raw(store)
    seq, sid, sseq, type_, ts, body, prev = conn.execute(
        "SELECT seq, session_id, session_seq, type, ts, body, prev_hash FROM events WHERE seq = 3"
    ).fetchone()
    body = body.replace('"glob"', '"bash"')
    conn.execute("UPDATE events SET body = ?, hash = ? WHERE seq = 3",
                 (body, chain_hash(seq, sid, sseq, type_, ts, body, prev)))
    assert broken(store).seq == 4


def test_verify_catches_a_deleted_event(workspace: Path) -> None:
    store = three_globs(workspace)
    raw(store).execute("DELETE FROM events WHERE seq = 3")
    found = broken(store)
    assert found.seq == 3 and "deleted" in found.reason


def test_verify_catches_reordered_events(workspace: Path) -> None:
    store = three_globs(workspace)
    conn = raw(store)
    conn.execute("UPDATE events SET seq = -1 WHERE seq = 3")
    conn.execute("UPDATE events SET seq = 3 WHERE seq = 4")
    conn.execute("UPDATE events SET seq = 4 WHERE seq = -1")
    assert broken(store).seq == 3


def test_update_and_delete_are_refused_by_the_store(workspace: Path) -> None:
    store, _, dispatch = make_session(workspace)
    dispatch.call("glob", {"pattern": "*"})
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("UPDATE events SET body = '{}' WHERE seq = 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("DELETE FROM events")


def test_a_truncated_tail_no_longer_reaches_the_noted_head(workspace: Path) -> None:
    store, _, dispatch = make_session(workspace)
    dispatch.call("glob", {"pattern": "*"})
    noted = store.head()
    conn = raw(store)
    conn.execute("DELETE FROM events WHERE seq = ?", (noted[0],))
    conn.executescript(SCHEMA)  # a careful attacker puts the guard triggers back
    count, head = store.verify()  # still a valid chain ...
    assert (count, head) != noted  # ... but not the one the auditor wrote down


def _append_many(path: str, n: int) -> None:
    store = EventStore(Path(path))
    session = Session.create(store, "/", version="t")
    for i in range(n):
        session.record_call(f"c{i}", "glob", {"pattern": "*"}, "cli")


def test_concurrent_processes_keep_one_unbroken_chain(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    EventStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), 40)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    count, _ = EventStore(path).verify()
    assert count == 4 * 41


def test_file_ledger_survives_a_restart(workspace: Path) -> None:
    target = workspace / "f.txt"
    target.write_text("one\n")
    store, session, dispatch = make_session(workspace)
    assert dispatch.call("read", {"path": str(target)}).ok
    store.close()
    # A new process would open the same store and session id: the read is still known.
    store2 = EventStore(events_db_path())
    again = Session.open(store2, session.id, str(workspace))
    assert again.seen_hash(str(target)) is not None
    result = tooling(store2, workspace, session=again, policy={"mode": "auto"}).dispatcher.call(
        "edit", {"path": str(target), "old_string": "one", "new_string": "two"})
    assert result.ok, result.content
    assert target.read_text() == "two\n"


def test_a_failed_read_does_not_count_as_seen(workspace: Path) -> None:
    target = workspace / "f.txt"
    target.write_text("x")
    _, session, dispatch = make_session(workspace)
    dispatch.call("read", {"path": str(target), "offset": 99})
    assert session.seen_hash(str(target)) is None


def test_open_unknown_session_and_wrong_workspace(workspace: Path, tmp_path: Path) -> None:
    store, session, _ = make_session(workspace)
    with pytest.raises(SessionNotFound):
        Session.open(store, "s-nope")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(SessionNotFound, match="belongs to workspace"):
        Session.open(store, session.id, str(other))


def test_events_round_trip_through_the_union() -> None:
    started = SessionStarted(session_id="s", workspace="/w", abhed_version="1")
    parsed = EVENT_ADAPTER.validate_json(started.model_dump_json())
    assert parsed == started
    obs = ObservationEvent(session_id="s", call_id="c", tool="read",
                           result=ToolResult(ok=True, content="x"), duration_ms=1.0)
    assert EVENT_ADAPTER.validate_json(obs.model_dump_json()) == obs


def test_unknown_event_type_or_future_schema_is_refused() -> None:
    with pytest.raises(ValueError):
        EVENT_ADAPTER.validate_python({"type": "mystery", "session_id": "s"})
    from appliance.events._models import migrate

    with pytest.raises(ValueError, match="schema_version"):
        migrate({"schema_version": 99})


def test_unopenable_store_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(EventLogError, match="cannot open the event log"):
        EventStore(blocker / "events.db")


def test_a_corrupt_database_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(EventLogError):
        EventStore(path)


def test_session_append_refuses_a_foreign_event(workspace: Path) -> None:
    _, session, _ = make_session(workspace)
    with pytest.raises(EventLogError):
        session.append(SessionStarted(session_id="other", workspace="/", abhed_version=""))


def test_big_arguments_are_stored_whole(workspace: Path) -> None:
    store, session, dispatch = make_session(workspace)
    content = "x" * 5_000_000
    assert dispatch.call("write", {"path": str(workspace / "big.txt"), "content": content}).ok
    action = [e.event for e in store.events(session.id, types=("action",))][0]
    assert isinstance(action, ActionEvent) and action.args["content"] == content
    assert store.verify()[0] == 5  # session_started, decision_basis, action, decision, observation
