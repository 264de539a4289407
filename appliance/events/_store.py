"""An append-only, hash-chained event log in SQLite (WAL).

Table layout (documented in docs/event-log.md)::

    events(seq INTEGER PRIMARY KEY,      -- global order, 1, 2, 3 ... no gaps
           session_id TEXT, session_seq INTEGER,   -- per-session order, no gaps
           type TEXT, ts TEXT,
           body TEXT,                     -- the event as JSON (pydantic's field order)
           prev_hash TEXT, hash TEXT)     -- the chain
    sessions(id TEXT PRIMARY KEY, workspace TEXT, created_at TEXT)

``hash = sha256(JSON [seq, session_id, session_seq, type, ts, prev_hash]
+ "\\n" + body)`` and ``prev_hash`` is the previous row's hash (64 zeros for
the first), so altering, deleting or reordering any row breaks the chain at
that row.  Triggers refuse UPDATE and DELETE as a first line; the chain is
what an auditor relies on, since anyone with the file can drop a trigger.
Appends take ``BEGIN IMMEDIATE`` so several processes can share one log.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from appliance._errors import ChainBroken, EventLogError, SessionNotFound
from appliance.events._models import EVENT_ADAPTER, Event, migrate

__all__ = ["EventStore", "StoredEvent", "GENESIS"]

GENESIS = "0" * 64

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    session_seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    ts TEXT NOT NULL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_session ON events(session_id, session_seq);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
"""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(seq: int, session_id: str, session_seq: int, type_: str, ts: str, body: str,
               prev: str) -> str:
    """sha256 over a JSON header line (position, identity, link) then the body as stored.

    The header is JSON, so no field can smuggle a separator; the body is
    hashed as the exact text in the row, so verification needs no
    re-serialisation and cannot be fooled by one.
    """
    header = canonical([seq, session_id, session_seq, type_, ts, prev])
    digest = hashlib.sha256(header.encode("utf-8", "surrogatepass"))
    digest.update(b"\n")
    digest.update(body.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    session_seq: int
    hash: str
    event: Event


class EventStore:
    """One SQLite file of events; safe to open from several processes."""

    def __init__(self, path: Path, *, synchronous: str = "NORMAL") -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, timeout=30.0,
                                   check_same_thread=False)
            self.db = sqlite_utils.Database(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash; FULL also
            # survives power loss at the cost of an fsync per event.
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise EventLogError(
                f"cannot open the event log {path}: {exc}. Check that ABHED_HOME points at a "
                "writable directory and that the file is an Abhed event log."
            ) from None
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    # -- writing ---------------------------------------------------------
    def create_session(self, session_id: str, workspace: str, created_at: str) -> None:
        try:
            self.db.table("sessions").insert(
                {"id": session_id, "workspace": workspace, "created_at": created_at}
            )
        except sqlite3.IntegrityError:
            raise EventLogError(f"session {session_id} already exists") from None

    def append(self, event: Event) -> StoredEvent:
        """Persist one event at the end of the chain; returns it with its position."""
        body = event.model_dump_json()
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                last = conn.execute(
                    "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
                row = conn.execute(
                    "SELECT MAX(session_seq) FROM events WHERE session_id = ?", (event.session_id,)
                ).fetchone()
                session_seq = (row[0] or 0) + 1
                digest = chain_hash(seq, event.session_id, session_seq, event.type, event.ts,
                                    body, prev)
                conn.execute(
                    "INSERT INTO events (seq, session_id, session_seq, type, ts, body, prev_hash,"
                    " hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, event.session_id, session_seq, event.type, event.ts, body, prev, digest),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise EventLogError(f"could not record {event.type} event in {self.path}: {exc}") from None
        return StoredEvent(seq, session_seq, digest, event)

    # -- reading ---------------------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT s.id, s.workspace, s.created_at, COUNT(e.seq), MAX(e.ts) FROM sessions s "
            "LEFT JOIN events e ON e.session_id = s.id GROUP BY s.id ORDER BY s.created_at, s.id"
        ).fetchall()
        return [
            {"id": r[0], "workspace": r[1], "created_at": r[2], "events": r[3], "last_event_at": r[4]}
            for r in rows
        ]

    def session_info(self, session_id: str) -> dict[str, Any]:
        for info in self.sessions():
            if info["id"] == session_id:
                return info
        raise SessionNotFound(f"no session {session_id!r} in {self.path}")

    def events(self, session_id: str | None = None, *, types: tuple[str, ...] = ()) -> Iterator[StoredEvent]:
        sql = "SELECT seq, session_seq, hash, body FROM events"
        where: list[str] = []
        params: list[Any] = []
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if types:
            where.append(f"type IN ({','.join('?' * len(types))})")
            params.extend(types)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq"
        for seq, session_seq, digest, body in self.conn.execute(sql, params):
            event = EVENT_ADAPTER.validate_python(migrate(json.loads(body)))
            yield StoredEvent(seq, session_seq, digest, event)

    def head(self) -> tuple[int, str]:
        row = self.conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def verify(self) -> tuple[int, str]:
        """Walk the whole chain; raise :class:`ChainBroken` at the first bad event.

        Returns the number of events and the head hash, which an auditor can
        note down: a log later cut short at its end still verifies, but no
        longer reaches that head.
        """
        prev = GENESIS
        expected_seq = 1
        per_session: dict[str, int] = {}
        count = 0
        for seq, sid, sseq, type_, ts, body, prev_hash, digest in self.conn.execute(
            "SELECT seq, session_id, session_seq, type, ts, body, prev_hash, hash FROM events "
            "ORDER BY seq"
        ):
            if seq != expected_seq:
                raise ChainBroken(expected_seq, f"missing (the next stored event is {seq}): deleted")
            if prev_hash != prev:
                raise ChainBroken(seq, "its prev_hash does not match the event before it: "
                                       "an event was removed, inserted or reordered")
            if chain_hash(seq, sid, sseq, type_, ts, body, prev_hash) != digest:
                raise ChainBroken(seq, "its contents do not match its hash: altered")
            want = per_session.get(sid, 0) + 1
            if sseq != want:
                raise ChainBroken(seq, f"session {sid} order broken (expected #{want}, found #{sseq})")
            per_session[sid] = sseq
            try:
                parsed = json.loads(body)
                EVENT_ADAPTER.validate_python(migrate(parsed))
            except (ValueError, TypeError) as exc:
                raise ChainBroken(seq, f"its body is not a valid event ({exc})") from None
            if parsed.get("session_id") != sid or parsed.get("type") != type_ or parsed.get("ts") != ts:
                raise ChainBroken(seq, "its columns disagree with its body: altered")
            prev = digest
            expected_seq += 1
            count += 1
        return count, prev
