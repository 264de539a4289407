"""Helpers for the event-log tests: real logs on disk, damaged the way disks damage them."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from appliance import Session, events_db_path
from appliance.events import EventStore

ABHED = Path(sys.executable).parent / "abhed"
REPO = Path(__file__).resolve().parents[3]

Cli = Callable[..., subprocess.CompletedProcess[str]]


def fill(sessions: int = 3, calls: int = 3, path: Path | None = None) -> EventStore:
    """A log of a few sessions, each a session_started then ``calls`` action/observation pairs."""
    from appliance.events import ObservationEvent
    from tools import ToolResult

    store = EventStore(path or events_db_path())
    for _ in range(sessions):
        session = Session.create(store, "/w", version="test")
        for i in range(calls):
            session.record_call(f"c{i}", "glob", {"pattern": "*" * 50}, "cli")
            session.append(ObservationEvent(session_id=session.id, call_id=f"c{i}", tool="glob",
                                            result=ToolResult(ok=True, content="x" * 300),
                                            duration_ms=1.0))
    return store


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def page_of(path: Path, table: str, last: bool = False) -> int:
    """The number of one of ``table``'s b-tree pages (the root, or the last leaf)."""
    conn = sqlite3.connect(path)
    try:
        pages = [r[0] for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? ORDER BY pageno", (table,))]
    finally:
        conn.close()
    return pages[-1] if last else pages[0]


def flip(path: Path, offset: int, count: int = 2) -> None:
    """A damaged disk block: ``count`` bytes inverted at ``offset``."""
    data = bytearray(path.read_bytes())
    for i in range(count):
        data[offset + i] ^= 0xFF
    path.write_bytes(bytes(data))


def checkpoint(path: Path) -> None:
    """Fold the WAL into the file, so damage to the file's pages is what readers see."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
