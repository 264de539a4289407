"""``abhed events prune``: retention is the operator's choice, and every deletion is on the record."""

from __future__ import annotations

import os
import pwd
import sqlite3
from pathlib import Path

from appliance._errors import EventLogError
from appliance.events._models import LOG_SESSION, SegmentDeleted
from appliance.events._segment_files import open_ro, sealed_segments
from appliance.events._store import EventStore
from foundation import digest_file

__all__ = ["prune_segments"]


def _range(path: Path) -> tuple[int, int, str]:
    conn = open_ro(path)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        row = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    base = int(meta.get("base_seq", 0))
    if row is None:
        return base + 1, base, meta.get("base_hash", "")
    return base + 1, int(row[0]), str(row[1])


def _user_name() -> str:
    """The kernel's user, not $USER (which a process may set to anything)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "-"


def prune_segments(store: EventStore, keep: int) -> list[SegmentDeleted]:
    """Delete all but the newest ``keep`` sealed segments, oldest first.

    Each deletion is appended to the active segment *before* the file goes,
    so a crash in between leaves a recorded deletion of a file still present
    (harmless), never an unrecorded gap.  The log must verify first: pruning
    must not hide damage.
    """
    if keep < 0:
        raise EventLogError("--keep must be 0 or more")
    store.verify()
    sealed = sealed_segments(store.path)
    doomed = sealed[:max(0, len(sealed) - keep)]
    done: list[SegmentDeleted] = []
    who = f"{_user_name()} (uid {os.getuid()})"
    for _, path in doomed:
        try:
            first, last, head = _range(path)
        except sqlite3.Error as exc:
            raise EventLogError(f"cannot read {path} before deleting it: {exc}") from None
        event = SegmentDeleted(session_id=LOG_SESSION, segment=path.name, first_seq=first,
                               last_seq=last, head_hash=head, sha256=digest_file(path).sha256,
                               deleted_by=who)
        store.append(event)
        path.unlink()
        done.append(event)
    return done
