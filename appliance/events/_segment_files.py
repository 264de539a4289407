"""Where a log's segment files live on disk, and opening them without changing them.

``state/events.db`` is the active segment; sealed segments sit in
``state/segments/events.NNNNNN.db`` (N = segment number, from 1); a damaged
file kept by repair is ``state/events.damaged-<UTC time>.db`` (with its
``-wal`` beside it when there was one).  ``events.db.lock`` is held shared by
every open store and exclusively by rotation and repair, which rename files.
"""

from __future__ import annotations

import re
import sqlite3
import urllib.parse
from pathlib import Path

__all__ = ["lock_path", "open_ro", "sealed_path", "sealed_segments", "segments_dir"]

_SEALED = re.compile(r"^(?P<stem>.+)\.(?P<n>\d{6})\.db$")


def segments_dir(active: Path) -> Path:
    return active.parent / "segments"


def sealed_path(active: Path, number: int) -> Path:
    return segments_dir(active) / f"{active.stem}.{number:06d}.db"


def lock_path(active: Path) -> Path:
    return active.with_name(active.name + ".lock")


def sealed_segments(active: Path) -> list[tuple[int, Path]]:
    """Sealed segments of the log whose active file is ``active``, oldest first."""
    folder = segments_dir(active)
    found: list[tuple[int, Path]] = []
    if folder.is_dir():
        for child in folder.iterdir():
            m = _SEALED.match(child.name)
            if m and m["stem"] == active.stem:
                found.append((int(m["n"]), child))
    return sorted(found)


def open_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection: it never checkpoints a WAL into, or otherwise writes, the file."""
    uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?mode=ro"
    return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0,
                           check_same_thread=False)


