"""The append-only, hash-chained audit log of every installer action.

One JSON object per line in ``PREFIX/audit/audit.log``.  Each entry carries
its sequence number, the previous entry's hash and its own hash (sha256 of
the entry's canonical JSON without ``hash``), so editing, deleting or
reordering any line breaks the chain at that line.  Cutting lines off the end
keeps a valid chain, so ``PREFIX/audit/head`` records the last sequence number
and hash as a second witness; ``audit verify`` checks both.  An auditor who
keeps a copy of the head hash (it is printed by every command that writes)
can prove nothing was rewritten since.

Entries are written with O_APPEND and fsync before the step they describe is
reported, and the installer's prefix lock serialises writers.
"""

from __future__ import annotations

import datetime
import getpass
import hashlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from foundation import load_if_present, reraised_as

from ._errors import AuditBroken

__all__ = ["GENESIS", "AuditLog", "AuditReport", "canonical", "who"]

GENESIS = "0" * 64
_MAX_LINE = 1 << 20


class _Head(BaseModel):
    """``audit.head``: the last entry's seq and hash (a witness that nothing was cut off)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int
    hash: str


def canonical(value: Any) -> bytes:
    """The byte form that is hashed: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def who() -> dict[str, Any]:
    """Who is acting: the effective user, the sudo user behind it, the host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.geteuid()}"
    out: dict[str, Any] = {"user": user, "uid": os.geteuid(), "host": socket.gethostname()}
    if os.environ.get("SUDO_USER"):
        out["sudo_user"] = os.environ["SUDO_USER"]
    return out


@dataclass(frozen=True)
class AuditReport:
    entries: int
    head: str


class AuditLog:
    """Appends and verifies ``PREFIX/audit/audit.log``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "audit.log"
        self.head_path = directory / "head"

    def entries(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, entry) for every line; AuditBroken on a line that is not an entry."""
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return
        with fh:
            for n, raw in enumerate(fh, 1):
                if len(raw) > _MAX_LINE:
                    raise AuditBroken(f"{self.path} line {n} is over {_MAX_LINE} bytes: the log "
                                      "was tampered with or damaged")
                try:
                    entry = json.loads(raw)
                except ValueError:
                    raise AuditBroken(f"{self.path} line {n} is not JSON: the log was tampered "
                                      "with or damaged; keep it as evidence and compare it with "
                                      "your copy of the head hash") from None
                if not isinstance(entry, dict):
                    raise AuditBroken(f"{self.path} line {n} is not an audit entry")
                yield n, entry

    def verify(self) -> AuditReport:
        """Walk the chain; raise AuditBroken naming the first line that does not hold."""
        prev, seq = GENESIS, 0
        for n, entry in self.entries():
            claimed = entry.get("hash")
            body = {k: v for k, v in entry.items() if k != "hash"}
            if entry.get("seq") != seq + 1:
                raise AuditBroken(f"{self.path} line {n}: sequence {entry.get('seq')!r}, expected "
                                  f"{seq + 1}: an entry was removed, inserted or reordered")
            if entry.get("prev") != prev:
                raise AuditBroken(f"{self.path} line {n} (seq {seq + 1}): its prev hash does not "
                                  "match the entry before it: an earlier entry was altered or "
                                  "removed")
            if hashlib.sha256(canonical(body)).hexdigest() != claimed:
                raise AuditBroken(f"{self.path} line {n} (seq {seq + 1}): the entry's content "
                                  "does not match its hash: it was altered after it was written")
            prev, seq = str(claimed), seq + 1
        head = self._read_head()
        if head is not None and (head.seq, head.hash) != (seq, prev):
            raise AuditBroken(f"{self.path} ends at seq {seq} but {self.head_path} records seq "
                              f"{head.seq}: entries were cut off the end (or the head "
                              "file was altered)")
        if head is None and seq:
            raise AuditBroken(f"{self.head_path} is missing while {self.path} has {seq} entries: "
                              "the head witness was removed")
        return AuditReport(entries=seq, head=prev)

    def _read_head(self) -> _Head | None:
        with reraised_as(AuditBroken):
            return load_if_present(self.head_path, _Head, what="audit head", cap=_MAX_LINE,
                                   hint="It was tampered with.")

    def _tail(self) -> tuple[int, str]:
        head = self._read_head()
        if head is not None:
            return head.seq, head.hash
        last: dict[str, Any] | None = None
        for _, entry in self.entries():
            last = entry
        if last is None:
            return 0, GENESIS
        return int(last["seq"]), str(last["hash"])

    def append(self, action: str, step: str, result: str, **fields: Any) -> dict[str, Any]:
        """Write one entry (fsynced) and move the head; returns the entry."""
        self.directory.mkdir(parents=True, exist_ok=True)
        seq, prev = self._tail()
        entry: dict[str, Any] = {
            "seq": seq + 1,
            "prev": prev,
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "who": who(),
            "action": action,
            "step": step,
            "result": result,
            **{k: v for k, v in fields.items() if v is not None},
        }
        entry["hash"] = hashlib.sha256(canonical(entry)).hexdigest()
        line = canonical(entry) + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp = self.head_path.with_name(f".head.{os.getpid()}")
        tmp.write_bytes(canonical({"seq": entry["seq"], "hash": entry["hash"]}) + b"\n")
        os.replace(tmp, self.head_path)
        return entry

    def recorded(self, version: int) -> dict[str, Any] | None:
        """The last ``recorded`` entry for ``version``: the digests of its record.json and
        release.json (verify the chain first)."""
        found = None
        for _, e in self.entries():
            if e.get("step") == "recorded" and e.get("version") == version \
                    and e.get("result") == "ok":
                found = e
        return found

    def last(self, n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for _, entry in self.entries():
            out.append(entry)
            if len(out) > n:
                out.pop(0)
        return out
