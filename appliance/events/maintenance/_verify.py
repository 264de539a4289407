"""``abhed events verify``: the chain, the files and the set of segments, in one report."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance._errors import ChainBroken, EventLogDamaged
from appliance.events._schema import GENESIS, ROW_COLUMNS, Row, structure_problems
from appliance.events._segment_files import open_ro, sealed_segments
from appliance.events.maintenance._chain import ChainWalker

__all__ = ["Problem", "VerifyReport", "verify_log"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong: in which file, at which event (None: the file itself), what."""

    file: str
    seq: int | None
    what: str

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, "seq": self.seq, "what": self.what}


@dataclass
class VerifyReport:
    events: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS
    segments: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    deletions: list[dict[str, Any]] = field(default_factory=list)
    forwarding: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_first(self) -> None:
        if not self.problems:
            return
        # An event's own fault names a position; prefer it over the file-level finding
        # (a dropped trigger usually goes with the altered row it made possible).
        first = next((p for p in self.problems if p.seq is not None), self.problems[0])
        if first.seq is not None:
            raise ChainBroken(first.seq, first.what, first.file)
        raise EventLogDamaged(first.file, first.what)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "events": self.events, "head_seq": self.head_seq,
                "head_hash": self.head_hash, "segments": self.segments,
                "problems": [p.as_json() for p in self.problems], "repairs": self.repairs,
                "deletions": self.deletions, "forwarding": self.forwarding}


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError:
        return {}


def _session_base(conn: sqlite3.Connection) -> dict[str, int]:
    try:
        return dict(conn.execute("SELECT session_id, session_seq FROM session_base").fetchall())
    except sqlite3.DatabaseError:
        return {}


def _deletions(files: list[Path]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in files:
        try:
            conn = open_ro(path)
            try:
                for seq, body in conn.execute(
                        "SELECT seq, body FROM events WHERE type = 'segment_deleted' ORDER BY seq"):
                    found.append({"recorded_at_seq": seq, **json.loads(body)})
            finally:
                conn.close()
        except (sqlite3.Error, ValueError):
            continue  # the main walk reports what is wrong with this file
    return found


def _covered(deletions: list[dict[str, Any]], first: int, last: int) -> bool:
    """Whether recorded deletions account for every event from ``first`` to ``last``."""
    want = first
    for d in sorted(deletions, key=lambda d: int(d["first_seq"])):
        if int(d["first_seq"]) <= want <= int(d["last_seq"]):
            want = int(d["last_seq"]) + 1
    return want > last


def verify_log(active: Path) -> VerifyReport:
    """Check every segment of the log whose active file is ``active``; never raises on damage."""
    files = [p for _, p in sealed_segments(active)] + ([active] if active.exists() else [])
    report = VerifyReport()
    report.deletions = _deletions(files)
    walker = ChainWalker()
    broken = False
    for path in files:
        seg: dict[str, Any] = {"file": str(path), "events": 0, "first_seq": None, "last_seq": None}
        report.segments.append(seg)
        try:
            conn = open_ro(path)
        except sqlite3.Error as exc:
            report.problems.append(Problem(str(path), None, f"SQLite cannot open it ({exc})"))
            broken = True
            continue
        try:
            for what in structure_problems(conn, full=True):
                report.problems.append(Problem(str(path), None, what))
            meta = _meta(conn)
            base_seq, base_hash = int(meta.get("base_seq", 0)), meta.get("base_hash", GENESIS)
            seg["segment"] = int(meta.get("segment", 1))
            if broken:
                continue
            if base_seq != walker.seq or base_hash != walker.head:
                if base_seq > walker.seq and _covered(report.deletions, walker.seq + 1, base_seq):
                    walker = ChainWalker(seq=base_seq, head=base_hash,
                                         per_session=_session_base(conn), count=walker.count)
                elif base_seq > walker.seq:
                    report.problems.append(Problem(
                        str(path), walker.seq + 1,
                        f"a segment is missing: events {walker.seq + 1}..{base_seq} are in no "
                        "file and no recorded deletion accounts for them"))
                    broken = True
                    continue
                else:
                    report.problems.append(Problem(
                        str(path), base_seq + 1,
                        f"this segment starts after event {base_seq} ({base_hash[:12]}…), which "
                        f"is not the previous segment's head ({walker.seq}, {walker.head[:12]}…)"))
                    broken = True
                    continue
            try:
                for raw in conn.execute(f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq"):
                    row = Row(*raw)
                    walker.feed(row)
                    seg["events"] += 1
                    seg["first_seq"] = seg["first_seq"] or row.seq
                    seg["last_seq"] = row.seq
                    if row.type == "log_repaired":
                        report.repairs.append({"seq": row.seq, **json.loads(row.body)})
                    elif row.type == "forwarding":
                        report.forwarding.append({"seq": row.seq, **json.loads(row.body)})
            except ChainBroken as exc:
                report.problems.append(Problem(str(path), exc.seq, exc.reason))
                broken = True
            except sqlite3.DatabaseError as exc:
                report.problems.append(Problem(
                    str(path), walker.seq + 1,
                    f"SQLite cannot read the events after {walker.seq} ({exc})"))
                broken = True
        finally:
            conn.close()
    report.events, report.head_seq, report.head_hash = walker.count, walker.seq, walker.head
    return report
