"""The model service's own record of every request it answered: who, from where, for what.

The model host's front (docs/model-service.md) authenticates each request to
a host and an engineer, then appends one :class:`RequestRecord` here when the
request ends, whatever its outcome.  The auditor's join (``abhed events
join``, docs/event-log.md) matches these records to the engineers' event
logs on (host, engineer, session, request id).

The file is SQLite in WAL mode, one table::

    requests(seq INTEGER PRIMARY KEY,   -- 1, 2, 3 ... no gaps
             body TEXT,                 -- the record as JSON, hashed as stored
             prev_hash TEXT, hash TEXT) -- the chain (foundation.link_hash)

``hash = link_hash([FORMAT, seq, prev_hash], body)``: the same rule as the
agent's event log (:mod:`foundation._chain`), with this log's format name in
the header so a row of one kind of log never verifies as the other.
Triggers refuse UPDATE and DELETE as a first line; the chain is what the
auditor relies on.  Appends take ``BEGIN IMMEDIATE`` under a thread lock, so
several request handlers (threads or processes) can share one log.

Records leave the host in two ways, like the agent's events: an export
(:meth:`RequestLog.export_jsonl`; OCSF from ``appliance.events``) and live
forwarding (the ``on_append`` hook, which the front wires to the agent's
syslog forwarder).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from foundation import GENESIS, link_hash, link_problem
from models._errors import RequestLogBroken, RequestLogError

__all__ = [
    "DETAIL_MAX",
    "LISTING_ENDPOINTS",
    "ID_MAX",
    "REQUEST_HEADER",
    "REQUEST_LOG_FORMAT",
    "SESSION_HEADER",
    "Outcome",
    "RequestLog",
    "RequestRecord",
    "StoredRequest",
    "read_requests",
    "request_ids",
]

#: The headers the agent sends with every model request (docs/model-service.md).
SESSION_HEADER = "X-Abhed-Session"
REQUEST_HEADER = "X-Abhed-Request"
REQUEST_LOG_FORMAT = "abhed-requests-1"
#: Paths that only describe the service (no prompt reaches the model): the agent asks for
#: them before a session exists, so the join counts them apart instead of flagging them.
LISTING_ENDPOINTS = frozenset({"/v1/models", "/health", "/version", "/ping"})
ID_MAX = 128
DETAIL_MAX = 2048
_LINE_MAX = 64 * 1024  # one exported record; a record is a few hundred bytes
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
# A Unix account name as useradd/sssd allow it (no whitespace, no separators).
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@$-]*")

Outcome = Literal["ok", "error", "refused", "cancelled"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS requests_no_update BEFORE UPDATE ON requests
BEGIN SELECT RAISE(ABORT, 'the request record is append-only'); END;
CREATE TRIGGER IF NOT EXISTS requests_no_delete BEFORE DELETE ON requests
BEGIN SELECT RAISE(ABORT, 'the request record is append-only'); END;
"""
_TRIGGERS = ("requests_no_update", "requests_no_delete")


def _iso(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value[:64]!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{value[:64]!r} has no time zone: write it in UTC (…+00:00)")
    return value


class RequestRecord(BaseModel):
    """One request the model service received, as the service saw it.

    ``host`` and ``engineer`` are what the service authenticated (the host's
    certificate, the relay's peer credentials): proven.  ``session_id`` and
    ``request_id`` are what the caller's process asserted in its headers: an
    engineer's own script may send none, or any.  ``status`` is the HTTP
    status returned to the caller (0 when none was: the caller went away).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    host: str = Field(min_length=1, max_length=253, pattern=f"^{_HOST.pattern}$")
    engineer: str = Field(min_length=1, max_length=64, pattern=f"^{_USER.pattern}$")
    session_id: str | None = Field(default=None, min_length=1, max_length=ID_MAX,
                                   pattern=f"^{_ID.pattern}$")
    request_id: str | None = Field(default=None, min_length=1, max_length=ID_MAX,
                                   pattern=f"^{_ID.pattern}$")
    endpoint: str = Field(default="", max_length=256, pattern=r"^[!-~]*$",
                          description="The API path asked for (/v1/chat/completions, "
                          "/v1/models); the join does not ask a listing for a session.")
    model: str = Field(default="", max_length=256,
                       description="The model the request named; empty when it named none.")
    started_at: str = Field(description="UTC, ISO 8601: when the front received the request.")
    ended_at: str = Field(description="UTC, ISO 8601: when its answer ended (or it was refused).")
    tokens_in: int = Field(default=0, ge=0, description="Prompt tokens, as vLLM counted them.")
    tokens_out: int = Field(default=0, ge=0, description="Completion tokens, as vLLM counted.")
    outcome: Outcome
    status: int = Field(ge=0, le=599)
    detail: str = Field(default="", description=f"Why, for anything but ok; cut at {DETAIL_MAX}.")

    @field_validator("started_at", "ended_at")
    @classmethod
    def _times(cls, value: str) -> str:
        return _iso(value)

    @field_validator("detail", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        # Free text from a server or a refusal: cut, and say so, rather than lose the record.
        if isinstance(value, str) and len(value) > DETAIL_MAX:
            return value[:DETAIL_MAX] + f"… [cut at {DETAIL_MAX} of {len(value)} characters]"
        return value


@dataclass(frozen=True)
class StoredRequest:
    """One record as stored: its place in the chain and the exact text that was hashed."""

    seq: int
    prev_hash: str
    hash: str
    body: str
    record: RequestRecord

    def as_json(self) -> dict[str, Any]:
        """One line of the JSONL export (``body`` kept as the hashed text)."""
        return {"format": REQUEST_LOG_FORMAT, "seq": self.seq, "prev_hash": self.prev_hash,
                "hash": self.hash, "body": self.body}


def _hash(seq: int, prev_hash: str, body: str) -> str:
    return link_hash([REQUEST_LOG_FORMAT, seq, prev_hash], body)


def _parse(where: str, seq: int, body: str) -> RequestRecord:
    try:
        return RequestRecord.model_validate_json(body)
    except ValidationError as exc:
        raise RequestLogBroken(where, seq, f"its body is not a request record ({_first(exc)})"
                               ) from None


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "record"
    return f"{loc}: {err['msg']}" + (f" (and {exc.error_count() - 1} more)"
                                     if exc.error_count() > 1 else "")


class _Walker:
    """Feeds stored rows in order; raises at the first that does not fit the chain."""

    def __init__(self, where: str) -> None:
        self.where, self.seq, self.head = where, 0, GENESIS

    def feed(self, seq: int, prev_hash: str, digest: str, body: str) -> StoredRequest:
        problem = link_problem(expected_seq=self.seq + 1, head=self.head, seq=seq,
                               prev_hash=prev_hash, stored_hash=digest,
                               computed_hash=lambda: _hash(seq, prev_hash, body))
        if problem is not None:
            raise RequestLogBroken(self.where, *problem)
        stored = StoredRequest(seq, prev_hash, digest, body, _parse(self.where, seq, body))
        self.seq, self.head = seq, digest
        return stored


class RequestLog:
    """The model service's request record: append, iterate, verify, export.

    Args:
        path: the SQLite file; created (0600, its folder 0700) when absent.
        on_append: called with each record once it is committed (the front
            forwards it to syslog here); it must not raise: the record is
            already kept, and the caller's answer must not fail over a
            collector that is down.
    """

    def __init__(self, path: Path, *,
                 on_append: Callable[[StoredRequest], None] | None = None) -> None:
        self.path = path
        self._on_append = on_append
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not path.exists():
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            conn = sqlite3.connect(path, isolation_level=None, timeout=30.0,
                                   check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise RequestLogError(f"cannot open the request record {path}: {exc}. Check that "
                                  "its folder exists and is writable by the model service"
                                  ) from None
        self._conn = conn
        try:
            self._check_and_init()
        except (sqlite3.Error, RequestLogError) as exc:
            conn.close()
            if isinstance(exc, RequestLogError):
                raise
            raise RequestLogError(f"{path} is not a usable request record (SQLite says {exc}); "
                                  "keep it as evidence and start the service with a new path"
                                  ) from None

    def _check_and_init(self) -> None:
        conn = self._conn
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "requests" not in tables:
            raise RequestLogError(f"{self.path} is an SQLite file but not a request record "
                                  f"(its tables: {', '.join(sorted(tables))}); name a new file")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if not tables:
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (REQUEST_LOG_FORMAT,))
        fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if fmt is None or fmt[0] != REQUEST_LOG_FORMAT:
            raise RequestLogError(f"{self.path} has format {fmt[0] if fmt else None!r}, not "
                                  f"{REQUEST_LOG_FORMAT!r}: not a request record this Abhed reads")
        missing = [t for t in _TRIGGERS if conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (t,)).fetchone()
            is None]
        if missing:
            raise RequestLogError(f"{self.path}: the append-only trigger(s) {', '.join(missing)} "
                                  "are missing: someone with the file removed the guard. Run "
                                  "`abhed events verify-requests` on it and keep it as evidence")
        last = conn.execute("SELECT seq, prev_hash, hash, body FROM requests "
                            "ORDER BY seq DESC LIMIT 1").fetchone()
        if last is not None and _hash(last[0], last[1], last[3]) != last[2]:
            raise RequestLogBroken(str(self.path), int(last[0]),
                                   "its contents do not match its hash: altered")

    # -- writing -----------------------------------------------------------------
    def append(self, record: RequestRecord) -> StoredRequest:
        """Commit one record, linked to the last; the stored form (then ``on_append``)."""
        body = record.model_dump_json()
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    last = conn.execute(
                        "SELECT seq, hash FROM requests ORDER BY seq DESC LIMIT 1").fetchone()
                    seq, prev = (int(last[0]) + 1, str(last[1])) if last else (1, GENESIS)
                    digest = _hash(seq, prev, body)
                    conn.execute("INSERT INTO requests VALUES (?, ?, ?, ?)",
                                 (seq, body, prev, digest))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise RequestLogError(
                    f"cannot append to the request record {self.path}: {exc}. The request was "
                    "not recorded; the front refuses requests until the record is writable "
                    "(free disk space, fix the file's owner)") from None
        stored = StoredRequest(seq, prev, digest, body, record)
        if self._on_append is not None:
            self._on_append(stored)
        return stored

    # -- reading -----------------------------------------------------------------
    def __iter__(self) -> Iterator[StoredRequest]:
        """Every record in order, each checked against the chain as it is read."""
        walker = _Walker(str(self.path))
        cursor = self._conn.execute("SELECT seq, prev_hash, hash, body FROM requests ORDER BY seq")
        for seq, prev, digest, body in cursor:
            yield walker.feed(int(seq), str(prev), str(digest), str(body))

    def verify(self) -> int:
        """Walk the whole chain; the number of records, or :class:`RequestLogBroken`."""
        return sum(1 for _ in self)

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last record; (0, GENESIS) for an empty log."""
        last = self._conn.execute(
            "SELECT seq, hash FROM requests ORDER BY seq DESC LIMIT 1").fetchone()
        return (int(last[0]), str(last[1])) if last else (0, GENESIS)

    def export_jsonl(self, dest: Path) -> int:
        """Verify, then write every record as one JSON line (atomically); how many."""
        records = list(self)
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as out:
                for stored in records:
                    out.write(json.dumps(stored.as_json(), ensure_ascii=False) + "\n")
            os.replace(tmp, dest)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise RequestLogError(f"cannot write the export {dest}: {exc}") from None
        return len(records)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RequestLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_requests(path: Path) -> list[StoredRequest]:
    """The records of a request log or of its JSONL export, the whole chain verified.

    What the auditor's join reads: a copy collected from a model host.  A
    SQLite file is opened read-only (nothing is written to evidence); any
    other file is read as the JSONL export.  Raises :class:`RequestLogBroken`
    at the first record that does not fit, :class:`RequestLogError` for a
    file that is neither.
    """
    try:
        with open(path, "rb") as fh:
            magic = fh.read(16)
    except OSError as exc:
        raise RequestLogError(f"cannot read the request record {path}: {exc}") from None
    if magic == b"SQLite format 3\x00":
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise RequestLogError(f"cannot open {path} read-only: {exc}") from None
        walker = _Walker(str(path))
        try:
            rows = conn.execute("SELECT seq, prev_hash, hash, body FROM requests ORDER BY seq")
            return [walker.feed(int(s), str(p), str(h), str(b)) for s, p, h, b in rows]
        except sqlite3.Error as exc:
            raise RequestLogError(
                f"{path} is not a request record (SQLite says {exc}); a copy of a live "
                "record needs its -wal file beside it: copy both, or export it on the model "
                "host with `abhed events export-requests`") from None
        finally:
            conn.close()
    return _read_jsonl(path)


def _read_jsonl(path: Path) -> list[StoredRequest]:
    walker = _Walker(str(path))
    out: list[StoredRequest] = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if len(raw) > _LINE_MAX:
                raise RequestLogError(f"{path} line {number} is {len(raw)} bytes, over the "
                                      f"{_LINE_MAX} a request record can be: not an export")
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                if not isinstance(line, dict) or line.get("format") != REQUEST_LOG_FORMAT:
                    raise ValueError(f"it is not a {REQUEST_LOG_FORMAT} line")
                fields = (int(line["seq"]), str(line["prev_hash"]), str(line["hash"]),
                          str(line["body"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise RequestLogError(
                    f"{path} line {number} is not a request record export line ({exc}): "
                    "give the file `abhed events export-requests` wrote, or the SQLite "
                    "record itself") from None
            out.append(walker.feed(*fields))
    return out


def request_ids(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The (session id, request id) a caller asserted, or a clear refusal.

    ``headers`` is case-insensitive as HTTP's are (httpx's and starlette's
    mappings both are).  A missing header is None; one that is empty,
    oversized or has characters outside ``[A-Za-z0-9._:-]`` raises
    :class:`RequestLogError` naming it, so the front refuses the request
    (and records the refusal without the bad value).
    """
    found: list[str | None] = []
    for name in (SESSION_HEADER, REQUEST_HEADER):
        value = headers.get(name)
        if value is not None and (len(value) > ID_MAX or not _ID.fullmatch(value)):
            shown = value[:32] + ("…" if len(value) > 32 else "")
            raise RequestLogError(
                f"the {name} header {shown!r} is not an id: at most {ID_MAX} characters of "
                "A-Z a-z 0-9 . _ : - (starting with a letter or digit); send it as the agent "
                "does, or leave it out")
        found.append(value)
    return found[0], found[1]
