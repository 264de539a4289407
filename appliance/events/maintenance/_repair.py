"""``abhed events repair``: salvage what still verifies, keep the damaged file as evidence.

The steps, each leaving the log in a state verify understands:

1. take the log's lock exclusively (no run may be writing);
2. copy the damaged file (and its WAL) to a scratch folder and read rows back
   from the copy only: plain SQL first, then row by row by ``seq``, then
   SQLite's own ``.recover`` (the sqlite3 shell) where pages are damaged;
3. walk the chain from the segment's base and keep the prefix that verifies;
4. rename the damaged file to ``events.damaged-<time>.db`` (bytes untouched);
5. write the salvaged rows, verbatim, as a sealed segment, and start a new
   active segment whose first event is ``log_repaired``: old head, last good
   event, what was lost, the evidence file and its sha256.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from appliance._errors import ChainBroken, EventLogError
from appliance.events._models import LOG_SESSION, LogRepaired
from appliance.events._schema import GENESIS, ROW_COLUMNS, Row, write_segment_file
from appliance.events._segment import start_segment
from appliance.events._segment_files import (
    lock_path,
    open_ro,
    sealed_path,
    sealed_segments,
    segments_dir,
)
from appliance.events.maintenance._chain import ChainWalker
from appliance.events.maintenance._verify import verify_log
from foundation import digest_file

__all__ = ["RepairResult", "repair_log"]


@dataclass(frozen=True)
class RepairResult:
    evidence: Path
    salvaged: int
    lost: int
    last_good_seq: int
    highest_seen: int
    method: str
    damage: str


def _read_sql(conn: sqlite3.Connection, rows: dict[int, Row]) -> bool:
    """Every row in order; False if SQLite stopped part way."""
    try:
        for raw in conn.execute(f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq"):
            rows.setdefault(raw[0], Row(*raw))
    except sqlite3.DatabaseError:
        return False
    return True


def _read_by_rowid(conn: sqlite3.Connection, rows: dict[int, Row], low: int) -> None:
    """Probe each seq on its own: a damaged leaf page costs only the rows on it."""
    try:
        high = conn.execute("SELECT MAX(seq) FROM events").fetchone()[0] or low
    except sqlite3.DatabaseError:
        high = max(rows, default=low) + 10_000
    misses = 0
    for seq in range(low + 1, high + 1):
        if seq in rows:
            continue
        try:
            raw = conn.execute(f"SELECT {ROW_COLUMNS} FROM events WHERE seq = ?", (seq,)).fetchone()
        except sqlite3.DatabaseError:
            raw = None
        if raw is None:
            misses += 1
            if misses > 10_000:
                break
            continue
        rows[seq] = Row(*raw)


def _read_recover(copy: Path, rows: dict[int, Row], scratch: Path) -> bool:
    """SQLite's ``.recover`` rebuilds what its pages still hold; needs the sqlite3 shell."""
    shell = shutil.which("sqlite3")
    if shell is None:
        return False
    try:
        done = subprocess.run([shell, str(copy), ".recover"], capture_output=True, timeout=600,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    rebuilt = scratch / "recovered.db"
    conn = sqlite3.connect(rebuilt, isolation_level=None)
    try:
        conn.executescript(done.stdout.decode("utf-8", "surrogateescape"))
        before = len(rows)
        _read_sql(conn, rows)
        return len(rows) > before
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _read_all(copy: Path, scratch: Path, low: int) -> tuple[dict[int, Row], list[tuple[str, str, str]], str]:
    rows: dict[int, Row] = {}
    sessions: list[tuple[str, str, str]] = []
    method = "sql"
    try:
        conn = sqlite3.connect(copy, isolation_level=None)
    except sqlite3.Error:
        conn = None
    if conn is not None:
        try:
            whole = _read_sql(conn, rows)
            if not whole:
                method = "rowid"
                _read_by_rowid(conn, rows, low)
            try:
                sessions = [(str(a), str(b), str(c)) for a, b, c in conn.execute(
                    "SELECT id, workspace, created_at FROM sessions")]
            except sqlite3.DatabaseError:
                pass
        finally:
            conn.close()
    if method != "sql" or conn is None or not rows:
        if _read_recover(copy, rows, scratch):
            method = "sqlite-recover"
    return rows, sessions, method


def repair_log(active: Path) -> RepairResult:
    """Repair the active segment of the log at ``active``; see the module docstring."""
    report = verify_log(active)
    if report.ok:
        raise EventLogError(f"the event log {active} verifies: there is nothing to repair")
    first = next((p for p in report.problems if p.seq is not None), report.problems[0])
    if Path(first.file) != active:
        raise EventLogError(
            f"the damage is in the sealed segment {first.file} ({first.what}); repair salvages "
            "the active segment only. Restore that segment from your backup or from an export "
            "(`abhed events verify --file` checks one), then verify again.")
    fd = os.open(lock_path(active), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EventLogError(f"cannot repair {active}: another process has the log open; stop "
                                "every run, rpc server and TUI using it, then try again") from None
        return _repair_locked(active, report.head_seq, report.head_hash,
                              "; ".join(p.what for p in report.problems))
    finally:
        os.close(fd)


def _base(active: Path, copy: Path) -> tuple[int, str, int, dict[str, int]]:
    """Where the damaged segment's chain starts: its own meta, else the last sealed head."""
    try:
        conn = open_ro(copy)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            counters = dict(conn.execute("SELECT session_id, session_seq FROM session_base"))
        finally:
            conn.close()
        if "base_seq" in meta:
            return int(meta["base_seq"]), meta["base_hash"], int(meta["segment"]), counters
    except sqlite3.Error:
        pass
    sealed = sealed_segments(active)
    if not sealed:
        return 0, GENESIS, 1, {}
    number, last = sealed[-1]
    head = verify_log_head(last)
    return head[0], head[1], number + 1, head[2]


def verify_log_head(segment: Path) -> tuple[int, str, dict[str, int]]:
    conn = open_ro(segment)
    try:
        row = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        counters = dict(conn.execute("SELECT session_id, session_seq FROM session_base"))
        counters.update(conn.execute("SELECT session_id, MAX(session_seq) FROM events GROUP BY 1"))
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()
    if row is None:
        return int(meta.get("base_seq", 0)), meta.get("base_hash", GENESIS), counters
    return int(row[0]), str(row[1]), counters


def _repair_locked(active: Path, seen_seq: int, seen_hash: str, damage: str) -> RepairResult:
    with tempfile.TemporaryDirectory(dir=active.parent, prefix=".repair-") as tmp:
        scratch = Path(tmp)
        copy = scratch / "events.db"
        shutil.copyfile(active, copy)
        wal = active.with_name(active.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, scratch / "events.db-wal")
        base_seq, base_hash, number, counters = _base(active, copy)
        rows, sessions, method = _read_all(copy, scratch, base_seq)
    walker = ChainWalker(seq=base_seq, head=base_hash, per_session=dict(counters))
    kept: list[Row] = []
    for seq in sorted(s for s in rows if s > base_seq):
        try:
            walker.feed(rows[seq])
        except ChainBroken:
            break
        kept.append(rows[seq])
    highest = max(rows, default=base_seq)
    if not sessions:
        sessions = _sessions_from(kept)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    evidence = active.with_name(f"{active.stem}.damaged-{stamp}.db")
    sha = digest_file(active).sha256
    os.replace(active, evidence)
    for suffix in ("-wal", "-shm"):
        side = active.with_name(active.name + suffix)
        if side.exists():
            os.replace(side, evidence.with_name(evidence.name + suffix))
    sealed = _write_sealed(active, number, base_seq, base_hash, counters, sessions, kept)
    lost = max(0, highest - walker.seq)
    event = LogRepaired(
        session_id=LOG_SESSION, damaged_file=evidence.name, damaged_sha256=sha, damage=damage,
        last_good_seq=walker.seq, last_good_hash=walker.head, highest_seq_seen=highest,
        highest_hash_seen=rows[highest].hash if highest in rows else seen_hash, lost_events=lost,
        method=method)
    final = dict(counters)
    final.update(walker.per_session)
    start_segment(active, number + 1, walker.seq, walker.head, final, sessions,
                         lambda _seq, _h: event)
    _ = sealed, seen_seq
    return RepairResult(evidence, len(kept), lost, walker.seq, highest, method, damage)


def _sessions_from(rows: list[Row]) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    for row in rows:
        if row.type == "session_started":
            body = json.loads(row.body)
            found.append((row.session_id, str(body.get("workspace", "")), row.ts))
    return found


def _write_sealed(active: Path, number: int, base_seq: int, base_hash: str,
                  counters: dict[str, int], sessions: list[tuple[str, str, str]],
                  kept: list[Row]) -> Path:
    target = sealed_path(active, number)
    segments_dir(active).mkdir(mode=0o700, exist_ok=True)
    if target.exists():
        raise EventLogError(f"cannot repair: {target} already exists")
    tmp = target.with_name(target.name + ".new")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        write_segment_file(conn, number=number, base_seq=base_seq, base_hash=base_hash,
                           created_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                           counters=counters, sessions=sessions, repaired=True)
        # Kept rows are copied as they were (their links already verified), never re-linked.
        conn.executemany(f"INSERT INTO events ({ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         [(r.seq, r.session_id, r.session_seq, r.type, r.ts, r.body, r.prev_hash,
                           r.hash) for r in kept])
    finally:
        conn.close()
    os.chmod(tmp, 0o400)
    os.replace(tmp, target)
    return target
