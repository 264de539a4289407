"""Starting a segment: a new active file whose chain begins at the previous head."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from appliance.events._models import Event
from appliance.events._schema import insert_chained, write_segment_file
from appliance.events._segment_files import open_ro

__all__ = ["created_age_s", "start_segment"]


def start_segment(active: Path, number: int, base_seq: int, base_hash: str,
                   counters: dict[str, int], sessions: list[tuple[str, str, str]],
                   first: Callable[[int, str], Event]) -> None:
    """Write a new active segment whose chain starts at (base_seq, base_hash)."""
    tmp = active.with_name(active.name + ".new")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    write_segment_file(conn, number=number, base_seq=base_seq, base_hash=base_hash,
                       created_at=datetime.now(UTC).isoformat(), counters=counters,
                       sessions=sessions)
    event = first(base_seq, base_hash)
    insert_chained(conn, base_seq + 1, event.session_id, counters.get(event.session_id, 0) + 1,
                   event.type, event.ts, event.model_dump_json(), base_hash)
    conn.close()
    os.chmod(tmp, 0o600)
    os.replace(tmp, active)


def created_age_s(path: Path) -> float:
    try:
        conn = open_ro(path)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return 0.0
    if row is None:
        return 0.0
    return time.time() - datetime.fromisoformat(row[0]).timestamp()
