"""What a door checks before it trusts a log, and SQLite's errors said as what they mean.

Kept apart from the store so the store reads as open, append, read; this is
the list of refusals (another user's directory, an open directory, a bad
newest event) and the mapping of SQLite's result codes to
:class:`EventLogFull` and :class:`EventLogDamaged`.
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
from pathlib import Path

from appliance._errors import EventLogDamaged, EventLogError, EventLogFull
from appliance.events._schema import ROW_COLUMNS, Row, chain_hash

__all__ = ["CORRUPT_CODES", "check_owner", "free_bytes", "tail_problems", "write_error"]

_MiB = 1 << 20
# SQLite primary result codes (https://sqlite.org/rescode.html).
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 10, 11, 13, 26
CORRUPT_CODES = (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path if path.is_dir() else path.parent).free
    except OSError:
        return -1


def write_error(path: Path, what: str, exc: sqlite3.Error) -> EventLogError:
    """SQLite's error, said as what it means for the operator."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    free = free_bytes(path)
    limit = _file_size_limit(path)
    if code == _SQLITE_FULL or (code == _SQLITE_IOERR and (0 <= free < 4 * _MiB or limit)):
        room = (f"the file-size limit (ulimit -f) of {limit} bytes is reached" if limit
                else f"{max(free, 0) // _MiB} MiB free on its file system")
        return EventLogFull(
            f"disk full: could not record {what} in {path} ({room}). Nothing was executed and "
            "the log is intact; free space there, or set ABHED_HOME to a disk with room, then "
            "try again.")
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return EventLogDamaged(str(path), f"SQLite says {exc}")
    return EventLogError(f"could not record {what} in {path}: {exc}")


def check_owner(state: Path) -> None:
    """On a shared host a log is its owner's alone: refuse one in another's or an open directory.

    The kernel already keeps others out of a 0700 directory; this turns a
    wrong ABHED_HOME into a sentence, and refuses a directory where others
    could swap the files (group- or world-writable without the sticky bit).
    """
    info = state.stat()
    me = os.geteuid()
    if me != 0 and info.st_uid != me:
        raise EventLogError(
            f"the event log directory {state} belongs to uid {info.st_uid}, not to you (uid {me}): "
            "each engineer keeps their own log. Set ABHED_HOME to a directory of your own.")
    if info.st_mode & 0o022 and not info.st_mode & 0o1000:
        raise EventLogError(
            f"the event log directory {state} is writable by other users (mode "
            f"{info.st_mode & 0o7777:o}), who could replace the log: chmod 700 {state}")


def _file_size_limit(path: Path) -> int:
    """The ``ulimit -f`` a write just ran into (EFBIG: for this process, a full disk), or 0."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft == resource.RLIM_INFINITY:
        return 0
    sizes = [p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
    return soft if any(size + 256 * 1024 >= soft for size in sizes) else 0


def tail_problems(conn: sqlite3.Connection) -> list[str]:
    """The last two rows: the newest event must hash right and link to the one before."""
    rows = [Row(*r) for r in conn.execute(
        f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq DESC LIMIT 2")]
    if not rows:
        return []
    last = rows[0]
    if chain_hash(last.seq, last.session_id, last.session_seq, last.type, last.ts, last.body,
                  last.prev_hash) != last.hash:
        return [f"event {last.seq}, the newest, does not match its hash"]
    if len(rows) == 2 and (rows[1].seq != last.seq - 1 or rows[1].hash != last.prev_hash):
        return [f"event {last.seq}, the newest, does not link to event {rows[1].seq}"]
    return []
