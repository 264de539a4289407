"""The head witness's collector and checker: a shared host's record of every engineer's log heads.

Layout of a witness directory (set up once by the administrator, see
docs/event-log.md, "A shared host")::

    WITNESS/            owner: the service account, 0755
      inbox/            owner: the service account, 1733 (sticky, anyone may drop, nobody may list)
      heads/            owner: the service account, 0755
        <uid>.jsonl     written only by `abhed events witness collect`, run as the service account

An engineer's store drops ``inbox/<uid>-<ns>-<rand>.head`` (its head: seq,
hash, log path) whenever it closes after appending.  The collector, run by
the service account, moves each drop into ``heads/<uid>.jsonl`` under the
uid the *kernel* says owns the drop (``st_uid``), never the uid it claims.
An engineer can therefore add claims but never remove or change a witnessed
head, and ``abhed events verify --witness WITNESS`` checks that every head
witnessed for this log is still on its chain.

The engineer's side (posting a head, checking the inbox takes one) is the
store's, in :mod:`appliance.events._witness`: a store on a shared host posts on
every close, and must not load the event log's maintenance for it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance._errors import EventLogError
from appliance.events._segment_files import open_ro, sealed_segments

__all__ = ["WitnessedHead", "check_witness", "collect_heads"]

_MAX_DROP = 4096
_MAX_DROPS = 100_000


@dataclass(frozen=True)
class WitnessedHead:
    uid: int
    log: str
    seq: int
    hash: str
    ts: str


def collect_heads(witness: Path) -> int:
    """Move every drop into ``heads/<owner uid>.jsonl``; returns how many were taken.

    Run as the service account that owns ``heads/``.  Drops that are not
    regular files, too big or not a head are removed and not recorded.
    """
    inbox, heads = witness / "inbox", witness / "heads"
    heads.mkdir(mode=0o755, exist_ok=True)
    taken = 0
    with os.scandir(inbox) as entries:
        for entry in entries:
            if taken >= _MAX_DROPS:
                break
            path = Path(entry.path)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                _discard(path)
                continue
            try:
                info = os.fstat(fd)
                data = os.read(fd, _MAX_DROP + 1) if stat.S_ISREG(info.st_mode) else b""
            finally:
                os.close(fd)
            head = _parse(data) if len(data) <= _MAX_DROP else None
            if head is not None:
                line = json.dumps({"uid": info.st_uid, **head, "collected_at":
                                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                out = heads / f"{info.st_uid}.jsonl"
                fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    os.write(fd, (line + "\n").encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                taken += 1
            _discard(path)
    return taken


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    seq, digest, log = value.get("seq"), value.get("hash"), value.get("log")
    if not (isinstance(seq, int) and seq >= 0 and isinstance(digest, str) and len(digest) == 64
            and isinstance(log, str) and len(log) < 1024):
        return None
    return {"log": log, "seq": seq, "hash": digest, "ts": str(value.get("ts", ""))[:40]}


def witnessed(witness: Path, uid: int, log: Path) -> list[WitnessedHead]:
    """The heads collected for ``uid``'s log at ``log`` (drops still in the inbox do not count)."""
    path = witness / "heads" / f"{uid}.jsonl"
    found: list[WitnessedHead] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise EventLogError(f"cannot read the witness {path}: {exc.strerror or exc}") from None
    for line in text.splitlines():
        try:
            v = json.loads(line)
            head = WitnessedHead(int(v["uid"]), str(v["log"]), int(v["seq"]), str(v["hash"]),
                                 str(v.get("ts", "")))
        except (ValueError, KeyError, TypeError):
            continue
        if head.log == str(log.absolute()):
            found.append(head)
    return found


def check_witness(witness: Path, log: Path, uid: int | None = None) -> tuple[int, list[str]]:
    """Every witnessed head of ``log`` must still be on its chain; returns (checked, problems)."""
    owner = uid if uid is not None else log.parent.stat().st_uid
    heads = witnessed(witness, owner, log)
    files = [p for _, p in sealed_segments(log)] + ([log] if log.exists() else [])
    problems: list[str] = []
    checked = 0
    for head in heads:
        found = _hash_at(files, head.seq)
        if found == "deleted":
            continue  # its segment was pruned, on the record; verify reports that
        checked += 1
        if found != head.hash:
            problems.append(
                f"the head witnessed at {head.ts} (event {head.seq}, {head.hash[:16]}…) is not "
                f"in the log ({'no such event' if found is None else 'another hash there'}): the "
                "log was rewritten or cut short after it was witnessed")
    return checked, problems


def _hash_at(files: list[Path], seq: int) -> str | None:
    first_present: int | None = None
    for path in files:
        try:
            conn = open_ro(path)
            try:
                if first_present is None:
                    row = conn.execute("SELECT MIN(seq) FROM events").fetchone()
                    first_present = row[0] if row and row[0] is not None else None
                got = conn.execute("SELECT hash FROM events WHERE seq = ?", (seq,)).fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        if got is not None:
            return str(got[0])
    if first_present is not None and seq < first_present and seq > 0:
        return "deleted"
    return None
