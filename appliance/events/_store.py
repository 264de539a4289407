"""An append-only, hash-chained event log in SQLite (WAL), in segments.

Table layout (documented in docs/event-log.md)::

    events(seq INTEGER PRIMARY KEY,      -- global order, 1, 2, 3 ... no gaps, across segments
           session_id TEXT, session_seq INTEGER,   -- per-session order, no gaps
           type TEXT, ts TEXT,
           body TEXT,                     -- the event as JSON (pydantic's field order)
           prev_hash TEXT, hash TEXT)     -- the chain
    sessions(id TEXT PRIMARY KEY, workspace TEXT, created_at TEXT)
    meta(key, value)                      -- segment number, base seq and hash
    session_base(session_id, session_seq) -- per-session counters carried into a segment

``hash = sha256(JSON [seq, session_id, session_seq, type, ts, prev_hash]
+ "\\n" + body)`` and ``prev_hash`` is the previous row's hash (64 zeros for
the log's first), so altering, deleting or reordering any row breaks the
chain at that row.  A new segment starts from the previous one's head.
Triggers refuse UPDATE and DELETE as a first line; the chain is what an
auditor relies on, since anyone with the file can drop a trigger.
Appends take ``BEGIN IMMEDIATE`` so several processes can share one log.

Every door opens the log through this class, so the damage check at open
(SQLite's quick_check, the schema, the triggers, the last event's hash) and
the mapping of SQLite's errors to :class:`EventLogDamaged` and
:class:`EventLogFull` live in one place.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appliance._errors import EventLogDamaged, EventLogError, EventLogFull, SessionNotFound
from appliance.events._forward import Forwarder
from appliance.events._guards import (
    CORRUPT_CODES,
    check_owner,
    free_bytes,
    tail_problems,
    write_error,
)
from appliance.events._learned import LearnedRedactions
from appliance.events._models import EVENT_ADAPTER, LOG_SESSION, Event, SegmentStarted, migrate
from appliance.events._redact import Redactor
from appliance.events._schema import (
    FORMAT,
    GENESIS,
    ROW_COLUMNS,
    SCHEMA,
    Row,
    insert_chained,
    structure_problems,
)
from appliance.events._segment import created_age_s, start_segment
from appliance.events._segment_files import (
    lock_path,
    open_ro,
    sealed_path,
    sealed_segments,
    segments_dir,
)
from appliance.events._settings import EventLogSettings

__all__ = ["EventStore", "StoredEvent", "GENESIS"]

_MiB = 1 << 20
# Written into the lock file when a log is first created here: a later open that finds the
# log gone but this mark present refuses, instead of starting a fresh log over the history.
_KEPT = b"abhed event log kept here\n"


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    session_seq: int
    hash: str
    event: Event
    prev_hash: str = ""


class EventStore:
    """One log (active segment plus sealed ones); safe to open from several processes."""

    def __init__(self, path: Path, *, synchronous: str = "NORMAL",
                 settings: EventLogSettings | None = None) -> None:
        self.path = path
        self.settings = settings or EventLogSettings()
        self._synchronous = synchronous
        # One connection serves every thread of this process (subagents append
        # concurrently); their transactions must not interleave on it.
        self._append_lock = threading.RLock()
        self._lock_fd = -1
        self._appended = False
        # What redaction learns in this process is remembered for the session's later ones.
        self.learned = LearnedRedactions(path.parent / "redactions")
        self.redactor = Redactor(self.settings.redact, persist=self.learned.remember)
        self._open()
        forward = self.settings.forward
        self._forwarder = Forwarder(forward, str(path)) if forward is not None else None

    def _open(self) -> None:
        path = self.path
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            check_owner(path.parent)
            self._lock_fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise EventLogError(
                f"cannot open the event log {path}: {exc}. Check that ABHED_HOME points at a "
                "writable directory and that the file is an Abhed event log."
            ) from None
        if path.exists():
            self._check_at_open()
        if self._rotation_due():
            self._try_exclusive(lambda: self._rotate("size" if self._too_big() else "age"))
        fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
        if not path.exists() and sealed_segments(path):
            # The active segment is gone but sealed ones exist (a rotation cut short):
            # continue the chain from the last of them, never a fresh, empty history.
            self._try_exclusive(lambda: self._continue_after(sealed_segments(path)[-1][1]))
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
        if not path.exists() and os.pread(self._lock_fd, len(_KEPT), 0) == _KEPT:
            os.close(self._lock_fd)
            raise EventLogDamaged(
                str(path), "the file is missing, though a log was kept here (its lock file "
                f"{lock_path(path).name} says so): it was deleted or moved, and a fresh log "
                "would hide its history. Restore it from a backup, or `abhed events verify "
                f"--file` an export; to start an empty log on purpose, delete {lock_path(path)}")
        try:
            if not path.exists():
                self._create(path)
                os.pwrite(self._lock_fd, _KEPT, 0)
            conn = sqlite3.connect(path, isolation_level=None, timeout=30.0,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash; FULL also
            # survives power loss at the cost of an fsync per event.
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.executescript(SCHEMA)
            self._init_meta(conn)
        except sqlite3.Error as exc:
            os.close(self._lock_fd)
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code in CORRUPT_CODES:
                raise EventLogDamaged(str(path), f"SQLite says {exc}") from None
            raise EventLogError(
                f"cannot open the event log {path}: {exc}. Check that ABHED_HOME points at a "
                "writable directory and that the file is an Abhed event log."
            ) from None
        except OSError as exc:
            os.close(self._lock_fd)
            raise EventLogError(f"cannot open the event log {path}: {exc}") from None
        self.conn = conn
        self._base = self._read_base(conn)

    def close(self) -> None:
        """Close; a store that appended posts its head to the witness, if one is configured."""
        if self._forwarder is not None:
            forwarder, self._forwarder = self._forwarder, None
            with self._append_lock:
                for note in forwarder.last_word():
                    try:
                        noted = self._append(note, note.model_dump_json())
                    except EventLogError:
                        break  # the log itself failed: closing must not raise over it
                    if getattr(note, "state", None) == "restored":  # the link works: send it
                        forwarder.forward(noted.seq, noted.session_seq, noted.prev_hash,
                                          noted.hash, note)
                forwarder.close()
        head = self.head() if self._appended and self.settings.witness_dir else None
        self.conn.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
        if head is not None and self.settings.witness_dir:
            self._appended = False
            from appliance.events._witness import post_head

            post_head(Path(self.settings.witness_dir), self.path, *head)

    # -- opening ---------------------------------------------------------
    def _check_at_open(self) -> None:
        """Refuse a damaged file before anything is written to it (read-only, so no checkpoint)."""
        try:
            conn = open_ro(self.path)
        except sqlite3.Error as exc:
            raise EventLogDamaged(str(self.path), f"SQLite cannot open it ({exc})") from None
        try:
            problems = structure_problems(conn, full=False)
            if not problems:
                problems = tail_problems(conn)
        except sqlite3.DatabaseError as exc:
            problems = [f"SQLite says {exc}"]
        finally:
            conn.close()
        if problems:
            raise EventLogDamaged(str(self.path), "; ".join(problems))

    def _create(self, path: Path) -> None:
        """Bring a fresh log into being whole: schema and meta first, then one atomic link.

        Two doors starting at once on a new ABHED_HOME used to race: the second
        found the first's file before its tables existed and refused it as
        damaged.  Built under a private temporary name and linked into place
        (``link`` fails if the name exists), the log is either absent or
        complete; the loser of the race simply opens the winner's log.  The
        file is created 0600 before SQLite writes a byte, and its -wal and -shm
        inherit the mode, so another user on a shared host cannot even read it.
        """
        tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{threading.get_ident()}")
        for suffix in ("", "-wal", "-shm", "-journal"):
            tmp.with_name(tmp.name + suffix).unlink(missing_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
                self._init_meta(conn)
            finally:
                conn.close()  # the last close checkpoints the WAL into the file
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process made it first: open theirs
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                tmp.with_name(tmp.name + suffix).unlink(missing_ok=True)

    @staticmethod
    def _init_meta(conn: sqlite3.Connection) -> None:
        if conn.execute("SELECT 1 FROM meta WHERE key = 'format'").fetchone() is None:
            conn.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", [
                ("format", FORMAT), ("segment", "1"), ("base_seq", "0"), ("base_hash", GENESIS),
                ("created_at", datetime.now(UTC).isoformat()),
            ])

    @staticmethod
    def _read_base(conn: sqlite3.Connection) -> tuple[int, str, int]:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        return int(meta.get("base_seq", 0)), meta.get("base_hash", GENESIS), int(meta.get("segment", 1))

    @classmethod
    def _segment_head(cls, conn: sqlite3.Connection) -> tuple[
            int, int, str, dict[str, int], list[Any]]:
        """What the next segment starts from: this one's number, its head (seq, hash), each
        session's last seq, and the sessions (a rotation and a continuation both read it)."""
        base_seq, base_hash, number = cls._read_base(conn)
        last = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        head_seq, head_hash = (last[0], last[1]) if last else (base_seq, base_hash)
        counters = dict(conn.execute("SELECT session_id, session_seq FROM session_base"))
        counters.update(conn.execute(
            "SELECT session_id, MAX(session_seq) FROM events GROUP BY session_id"))
        sessions = conn.execute("SELECT id, workspace, created_at FROM sessions").fetchall()
        return number, head_seq, head_hash, counters, sessions

    def _try_exclusive(self, action: Callable[[], object]) -> None:
        """Run ``action`` if no other process has the log open; otherwise leave it for later."""
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        action()

    # -- rotation --------------------------------------------------------
    def _too_big(self) -> bool:
        limit = self.settings.rotate_mb * _MiB
        if not limit or not self.path.exists():
            return False
        wal = self.path.with_name(self.path.name + "-wal")
        size = self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        return size >= limit

    def _rotation_due(self) -> bool:
        if not self.path.exists():
            return False
        if self._too_big():
            return True
        days = self.settings.rotate_days
        return bool(days) and time.time() - self.path.stat().st_mtime >= days * 86400 \
            and created_age_s(self.path) >= days * 86400

    def rotate(self, reason: str = "operator", first: Callable[[int, str], Event] | None = None) -> Path:
        """Seal the active segment now (needs the log to be open nowhere else); returns the sealed file."""
        self.conn.close()
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._open()
            raise EventLogError(f"cannot rotate {self.path}: another process has the log open; "
                                "try again when no run is active") from None
        try:
            sealed = self._rotate(reason, first)
        finally:
            os.close(self._lock_fd)
            self._open()
        return sealed

    def _rotate(self, reason: str, first: Callable[[int, str], Event] | None = None) -> Path:
        """Seal ``events.db`` into ``segments/`` and start a new segment from its head (lock held)."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            conn.executescript(SCHEMA)
            self._init_meta(conn)
            number, head_seq, head_hash, counters, sessions = self._segment_head(conn)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.close()
            target = sealed_path(self.path, number)
            segments_dir(self.path).mkdir(mode=0o700, exist_ok=True)
            if target.exists():
                raise EventLogError(f"cannot rotate {self.path}: {target} already exists")
            os.replace(self.path, target)
            os.chmod(target, 0o400)
            for suffix in ("-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            start_segment(self.path, number + 1, head_seq, head_hash, counters, sessions,
                                first or (lambda seq, h: SegmentStarted(
                                    session_id=LOG_SESSION, segment=number + 1,
                                    previous_segment=target.name, previous_head_seq=seq,
                                    previous_head_hash=h, reason=reason)))
        except sqlite3.Error as exc:
            raise write_error(self.path, "the rotation", exc) from None
        return target

    def _continue_after(self, last_sealed: Path) -> None:
        if self.path.exists():
            return
        conn = open_ro(last_sealed)
        try:
            number, head_seq, head_hash, counters, sessions = self._segment_head(conn)
        finally:
            conn.close()
        start_segment(self.path, number + 1, head_seq, head_hash, counters, sessions,
                            lambda seq, h: SegmentStarted(
                                session_id=LOG_SESSION, segment=number + 1,
                                previous_segment=last_sealed.name, previous_head_seq=seq,
                                previous_head_hash=h, reason="continued"))

    # -- space -----------------------------------------------------------
    def check_reserve(self) -> None:
        """Refuse new work below the disk reserve, or when the configured witness cannot take a head."""
        if self.settings.witness_dir:
            from appliance.events._witness import check_inbox

            check_inbox(Path(self.settings.witness_dir))
        reserve = self.settings.reserve_mb * _MiB
        free = free_bytes(self.path.parent)
        if reserve and 0 <= free < reserve:
            raise EventLogFull(
                f"disk nearly full: {free // _MiB} MiB free on the file system holding "
                f"{self.path}, below the reserve of {self.settings.reserve_mb} MiB kept so that "
                "every tool call can be recorded. Nothing was started; free space there (or "
                "lower events.reserve_mb in config.json), then try again.")

    # -- writing ---------------------------------------------------------
    def create_session(self, session_id: str, workspace: str, created_at: str) -> None:
        # Under the append lock: the connection is shared with appends, whose BEGIN
        # IMMEDIATE ... COMMIT must not interleave with this insert (a child session
        # created mid-append once failed with "cannot start a transaction within a
        # transaction").
        with self._append_lock:
            self._create_session(session_id, workspace, created_at)

    def _create_session(self, session_id: str, workspace: str, created_at: str) -> None:
        try:
            # One autocommitted statement (the connection has isolation_level=None).
            self.conn.execute("INSERT INTO sessions (id, workspace, created_at) VALUES (?, ?, ?)",
                              (session_id, workspace, created_at))
        except sqlite3.IntegrityError:
            raise EventLogError(f"session {session_id} already exists") from None
        except sqlite3.Error as exc:
            raise write_error(self.path, f"session {session_id}", exc) from None

    def append(self, event: Event) -> StoredEvent:
        """Persist one event at the end of the chain; returns it (redacted) with its position.

        Redaction happens here, before serialisation, so no other path can
        make an unredacted event durable; callers that stream or show the
        event use the returned copy.
        """
        if self.redactor:
            # Validated again after the rewrite, by the event's own class: the same schema the
            # union's discriminator would pick for its ``type``, without building the union's
            # 25 validators for one tool call (docs/performance.md).  A rewrite that changed
            # ``type`` would fail either way, on the class's literal.
            event = type(event).model_validate(self.redactor.value(event.model_dump(mode="json")))
        body = event.model_dump_json()
        with self._append_lock:
            stored = self._append(event, body)
            if self._forwarder is not None:
                self._forward(self._forwarder, stored)
            return stored

    def _forward(self, forwarder: Forwarder, stored: StoredEvent) -> None:
        """Send ``stored`` on (never raises, never blocks); record what the link did.

        Called under the append lock, so events leave in ``seq`` order.  A
        note about the link is appended and offered to the collector too (the
        SIEM learns of a gap from the "restored" note); a note's own send
        makes no further note.
        """
        notes = forwarder.forward(stored.seq, stored.session_seq, stored.prev_hash, stored.hash,
                                  stored.event)
        for note in notes:
            try:
                noted = self._append(note, note.model_dump_json())
            except EventLogError:
                return  # the log failed after the caller's event was committed; next append says so
            forwarder.forward(noted.seq, noted.session_seq, noted.prev_hash, noted.hash, note)

    def _append(self, event: Event, body: str) -> StoredEvent:
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                last = conn.execute(
                    "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                seq, prev = (last[0] + 1, last[1]) if last else (self._base[0] + 1, self._base[1])
                row = conn.execute(
                    "SELECT MAX(session_seq) FROM events WHERE session_id = ?", (event.session_id,)
                ).fetchone()
                if row[0] is None:
                    row = conn.execute("SELECT session_seq FROM session_base WHERE session_id = ?",
                                       (event.session_id,)).fetchone() or (0,)
                session_seq = row[0] + 1
                digest = insert_chained(conn, seq, event.session_id, session_seq, event.type,
                                        event.ts, body, prev)
                conn.execute("COMMIT")
                self._appended = True
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise write_error(self.path, f"the {event.type} event", exc) from None
        return StoredEvent(seq, session_seq, digest, event, prev)

    # -- reading ---------------------------------------------------------
    def _connections(self) -> Iterator[tuple[Path, sqlite3.Connection]]:
        """Every segment's connection, oldest first; sealed ones opened read-only for the walk."""
        for _, sealed in sealed_segments(self.path):
            try:
                conn = open_ro(sealed)
            except sqlite3.Error as exc:
                raise EventLogDamaged(str(sealed), f"SQLite cannot open it ({exc})") from None
            try:
                yield sealed, conn
            finally:
                conn.close()
        yield self.path, self.conn

    def _query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Iterator[tuple[Path, Any]]:
        for path, conn in self._connections():
            try:
                for row in conn.execute(sql, params):
                    yield path, row
            except sqlite3.DatabaseError as exc:
                raise EventLogDamaged(str(path), f"SQLite says {exc}") from None

    def sessions(self) -> list[dict[str, Any]]:
        counts: dict[str, list[Any]] = {}
        for _, (sid, n, last) in self._query(
                "SELECT session_id, COUNT(*), MAX(ts) FROM events GROUP BY session_id"):
            got = counts.setdefault(sid, [0, None])
            got[0] += n
            got[1] = max(got[1] or "", last or "") or None
        try:
            rows = self.conn.execute(
                "SELECT id, workspace, created_at FROM sessions ORDER BY created_at, id").fetchall()
        except sqlite3.DatabaseError as exc:
            raise EventLogDamaged(str(self.path), f"SQLite says {exc}") from None
        return [
            {"id": r[0], "workspace": r[1], "created_at": r[2],
             "events": counts.get(r[0], [0, None])[0], "last_event_at": counts.get(r[0], [0, None])[1]}
            for r in rows
        ]

    def session_info(self, session_id: str) -> dict[str, Any]:
        for info in self.sessions():
            if info["id"] == session_id:
                return info
        raise SessionNotFound(f"no session {session_id!r} in {self.path}")

    def events(self, session_id: str | None = None, *, types: tuple[str, ...] = ()) -> Iterator[StoredEvent]:
        sql = "SELECT seq, session_seq, hash, body, prev_hash FROM events"
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
        for path, (seq, session_seq, digest, body, prev_hash) in self._query(sql, params):
            try:
                event = EVENT_ADAPTER.validate_python(migrate(json.loads(body)))
            except (ValueError, TypeError) as exc:
                raise EventLogDamaged(str(path), f"its body is not a valid event ({exc})",
                                      seq) from None
            yield StoredEvent(seq, session_seq, digest, event, prev_hash)

    def rows(self) -> Iterator[Row]:
        """Every stored row exactly as in the files, in order (for export)."""
        for _, r in self._query(f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq"):
            yield Row(*r)

    def head(self) -> tuple[int, str]:
        try:
            row = self.conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        except sqlite3.DatabaseError as exc:
            raise EventLogDamaged(str(self.path), f"SQLite says {exc}") from None
        return (row[0], row[1]) if row else (self._base[0], self._base[1])

    def verify(self) -> tuple[int, str]:
        """Walk every segment; raise :class:`ChainBroken` (or EventLogDamaged) at the first fault.

        Returns the number of events and the head hash, which an auditor can
        note down: a log later cut short at its end still verifies, but no
        longer reaches that head.
        """
        from appliance.events.maintenance import verify_log

        report = verify_log(self.path)
        report.raise_first()
        return report.events, report.head_hash


