"""The model service's request record: chained, append-only, safe to share, honest when broken."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from models import (
    REQUEST_HEADER,
    SESSION_HEADER,
    RequestLog,
    RequestLogBroken,
    RequestLogError,
    RequestRecord,
    StoredRequest,
    read_requests,
    request_ids,
)


def _record(**over: object) -> RequestRecord:
    fields: dict[str, object] = {
        "host": "eng-1", "engineer": "ana", "session_id": "s-20261204-101010-abc123",
        "request_id": "r-1", "model": "tiny", "started_at": "2026-12-04T10:10:10.000001+00:00",
        "ended_at": "2026-12-04T10:10:11+00:00", "tokens_in": 12, "tokens_out": 3,
        "outcome": "ok", "status": 200}
    fields.update(over)
    return RequestRecord.model_validate(fields)


def test_append_iterate_verify_and_export_round_trip(tmp_path: Path) -> None:
    seen: list[StoredRequest] = []
    with RequestLog(tmp_path / "req.db", on_append=seen.append) as log:
        a = log.append(_record())
        b = log.append(_record(request_id="r-2", session_id=None, outcome="refused", status=401,
                               detail="no credential"))
        assert (a.seq, b.seq, b.prev_hash) == (1, 2, a.hash)
        assert [s.record for s in log] == [a.record, b.record]
        assert log.verify() == 2 and log.head() == (2, b.hash)
        assert seen == [a, b]
        assert log.export_jsonl(tmp_path / "req.jsonl") == 2
    assert [s.record for s in read_requests(tmp_path / "req.jsonl")] == [a.record, b.record]
    assert [s.hash for s in read_requests(tmp_path / "req.db")] == [a.hash, b.hash]
    assert oct((tmp_path / "req.db").stat().st_mode & 0o777) == "0o600"


def test_concurrent_appends_from_threads_and_two_opens_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "req.db"
    logs = [RequestLog(path), RequestLog(path)]  # two handles: two processes' view of one file

    def handler(i: int) -> None:
        for j in range(20):
            logs[i % 2].append(_record(request_id=f"r-{i}-{j}"))

    threads = [threading.Thread(target=handler, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert logs[0].verify() == 120
    assert len({s.record.request_id for s in logs[1]}) == 120
    for log in logs:
        log.close()


def _tamper(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER requests_no_update")
    conn.execute("DROP TRIGGER requests_no_delete")
    conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(("sql", "seq", "words"), [
    ("UPDATE requests SET body = replace(body, '\"ana\"', '\"bob\"') WHERE seq = 2", 2, "altered"),
    ("DELETE FROM requests WHERE seq = 2", 2, "deleted"),
    ("UPDATE requests SET prev_hash = hash WHERE seq = 3", 3, "prev_hash"),
])
def test_tampered_log_is_named_at_the_record(tmp_path: Path, sql: str, seq: int,
                                             words: str) -> None:
    path = tmp_path / "req.db"
    with RequestLog(path) as log:
        for i in range(4):
            log.append(_record(request_id=f"r-{i}"))
        log.export_jsonl(tmp_path / "before.jsonl")
    _tamper(path, sql)
    with pytest.raises(RequestLogBroken, match=words) as info:
        read_requests(path)
    assert info.value.seq == seq
    # The export taken before the tampering still verifies: nothing in it was lost.
    assert len(read_requests(tmp_path / "before.jsonl")) == 4


def test_open_refuses_a_log_whose_guard_was_removed_or_last_record_altered(tmp_path: Path) -> None:
    path = tmp_path / "req.db"
    with RequestLog(path) as log:
        log.append(_record())
    _tamper(path, "UPDATE requests SET body = replace(body, '\"eng-1\"', '\"eng-2\"')")
    with pytest.raises(RequestLogError, match="trigger"):
        RequestLog(path)
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TRIGGER requests_no_update BEFORE UPDATE ON requests BEGIN "
                       "SELECT RAISE(ABORT, 'x'); END; CREATE TRIGGER requests_no_delete BEFORE "
                       "DELETE ON requests BEGIN SELECT RAISE(ABORT, 'x'); END;")
    conn.close()
    with pytest.raises(RequestLogBroken, match="altered"):
        RequestLog(path)


def test_updates_and_deletes_are_refused_by_the_file(tmp_path: Path) -> None:
    path = tmp_path / "req.db"
    with RequestLog(path) as log:
        log.append(_record())
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM requests")
    conn.close()


def test_other_files_are_refused_with_what_they_are(tmp_path: Path) -> None:
    other = tmp_path / "events.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE events (seq INTEGER)")
    conn.close()
    with pytest.raises(RequestLogError, match="not a request record"):
        RequestLog(other)
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"seq": 1}\n')
    with pytest.raises(RequestLogError, match="line 1 is not a request record"):
        read_requests(junk)
    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(b"x" * 70_000 + b"\n")
    with pytest.raises(RequestLogError, match="over the"):
        read_requests(huge)
    with pytest.raises(RequestLogError, match="cannot read"):
        read_requests(tmp_path / "absent")


def test_an_export_line_with_a_body_that_is_not_a_record_is_broken(tmp_path: Path) -> None:
    with RequestLog(tmp_path / "req.db") as log:
        log.append(_record())
        log.export_jsonl(tmp_path / "x.jsonl")
    line = json.loads((tmp_path / "x.jsonl").read_text())
    line["body"] = json.dumps({"host": "eng-1"})
    from foundation import GENESIS, link_hash
    line["hash"] = link_hash(["abhed-requests-1", 1, GENESIS], line["body"])
    (tmp_path / "x.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(RequestLogBroken, match="not a request record"):
        read_requests(tmp_path / "x.jsonl")


@pytest.mark.parametrize(("field", "value"), [
    ("host", ""), ("host", "a b"), ("host", "h" * 254), ("engineer", "ana\nbob"),
    ("engineer", "x" * 65), ("session_id", "s" * 129), ("request_id", "r/1"),
    ("outcome", "maybe"), ("status", 700), ("tokens_in", -1), ("started_at", "yesterday"),
    ("ended_at", "2026-12-04T10:10:11"), ("surprise", 1), ("endpoint", "/v1/a b"),
    ("endpoint", "/" * 257),
])
def test_bad_fields_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        _record(**{field: value})


def test_missing_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="host"):
        RequestRecord.model_validate({"engineer": "ana", "outcome": "ok", "status": 200,
                                      "started_at": "2026-12-04T10:10:10+00:00",
                                      "ended_at": "2026-12-04T10:10:10+00:00"})


def test_oversized_detail_is_cut_and_says_so() -> None:
    record = _record(outcome="error", status=500, detail="e" * 10_000)
    assert record.detail.endswith("[cut at 2048 of 10000 characters]")


def test_request_ids_from_headers() -> None:
    assert request_ids({SESSION_HEADER: "s-1", REQUEST_HEADER: "r-1"}) == ("s-1", "r-1")
    assert request_ids({}) == (None, None)
    for bad in ("", "a" * 129, "s 1", "s\u00e91", "-s"):
        with pytest.raises(RequestLogError, match=SESSION_HEADER):
            request_ids({SESSION_HEADER: bad})
