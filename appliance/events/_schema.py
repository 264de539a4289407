"""The log's file format: tables, triggers, the chain hash and the structural check.

Kept apart from the store so that verification, repair and export (which
read files the store refuses to open) share one definition of "well formed".
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from foundation import GENESIS, canonical, link_hash

__all__ = ["GENESIS", "FORMAT", "Row", "ROW_COLUMNS", "SCHEMA", "canonical", "chain_hash",
           "insert_chained", "structure_problems", "write_segment_file"]

FORMAT = "abhed-events-1"

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS session_base (
    session_id TEXT PRIMARY KEY,
    session_seq INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS meta_no_update BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS meta_no_delete BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
"""

ROW_COLUMNS = "seq, session_id, session_seq, type, ts, body, prev_hash, hash"
_EVENT_COLUMNS = ["seq", "session_id", "session_seq", "type", "ts", "body", "prev_hash", "hash"]
_TRIGGERS = ("events_no_update", "events_no_delete")


@dataclass(frozen=True)
class Row:
    """One stored event exactly as in the file (``body`` is the hashed text)."""

    seq: int
    session_id: str
    session_seq: int
    type: str
    ts: str
    body: str
    prev_hash: str
    hash: str

    def as_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "session_id": self.session_id, "session_seq": self.session_seq,
                "type": self.type, "ts": self.ts, "prev_hash": self.prev_hash, "hash": self.hash,
                "body": self.body}


def chain_hash(seq: int, session_id: str, session_seq: int, type_: str, ts: str, body: str,
               prev: str) -> str:
    """The chain rule (``foundation.link_hash``) over this log's header: position,
    identity, link."""
    return link_hash([seq, session_id, session_seq, type_, ts, prev], body)


def insert_chained(conn: sqlite3.Connection, seq: int, session_id: str, session_seq: int,
                   type_: str, ts: str, body: str, prev: str) -> str:
    """Insert one event row linked to ``prev``; its hash.  The one writer of a new link:
    the store's appends and a new segment's first event both come through here."""
    digest = chain_hash(seq, session_id, session_seq, type_, ts, body, prev)
    conn.execute(f"INSERT INTO events ({ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (seq, session_id, session_seq, type_, ts, body, prev, digest))
    return digest


def write_segment_file(conn: sqlite3.Connection, *, number: int, base_seq: int, base_hash: str,
                       created_at: str, counters: dict[str, int],
                       sessions: list[tuple[str, str, str]], repaired: bool = False) -> None:
    """A fresh segment's schema and header: where its chain starts, each session's
    counter so far and the sessions it continues.  A new active segment (rotation) and a
    repaired sealed one are laid out by this one function; their rows follow."""
    conn.executescript(SCHEMA)
    meta = [("format", FORMAT), ("segment", str(number)), ("base_seq", str(base_seq)),
            ("base_hash", base_hash), ("created_at", created_at)]
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                     meta + ([("repaired", "true")] if repaired else []))
    conn.executemany("INSERT INTO session_base VALUES (?, ?)", sorted(counters.items()))
    conn.executemany("INSERT OR IGNORE INTO sessions VALUES (?, ?, ?)", sessions)


def structure_problems(conn: sqlite3.Connection, *, full: bool = True) -> list[str]:
    """What is wrong with the file itself, as sentences; empty when it is sound.

    ``full`` runs SQLite's ``integrity_check`` (every page, every index
    entry); otherwise ``quick_check`` (every page, no index cross-check),
    which is what a door can afford on every start.
    """
    problems: list[str] = []
    pragma = "integrity_check" if full else "quick_check"
    found: list[str] = []
    try:
        for r in conn.execute(f"PRAGMA {pragma}(20)"):
            found.append(str(r[0]))
    except sqlite3.DatabaseError as exc:
        found.append(str(exc))
    found = [line for text in found for line in text.splitlines()
             if line and not line.startswith("*** in database")]
    if found != ["ok"]:
        problems.append(f"SQLite's {pragma} reports: " + "; ".join(found[:5]))
    try:
        columns = [str(r[1]) for r in conn.execute("PRAGMA table_info(events)")]
        triggers = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'")}
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        return problems + [f"its schema cannot be read ({exc})"]
    if not columns:
        problems.append("it has no events table: it is not an Abhed event log")
    elif columns != _EVENT_COLUMNS:
        problems.append(f"the events table has columns {columns}, not {_EVENT_COLUMNS}")
    if "sessions" not in tables:
        problems.append("the sessions table is missing")
    missing = [t for t in _TRIGGERS if t not in triggers]
    if missing:
        problems.append("the append-only trigger(s) " + ", ".join(missing) + " are missing: "
                        "someone with the file removed the guard")
    return problems
