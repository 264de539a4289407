"""Live forwarding: each appended event also goes to the host's syslog or journald.

The store calls :meth:`Forwarder.forward` with every event it has just
committed (already redacted: nothing unredacted leaves).  A send never
blocks and never raises: the socket is non-blocking, a send that fails
(no collector, its queue full, its socket gone) keeps the message in a
bounded backlog that is sent, in order, before the next event once a send
works again.  What the link did is itself recorded (:class:`ForwardingChanged`),
at most one "interrupted" a minute per process, so a syslog that flaps or
stays down for hours leaves two events, not thousands.

Wire formats (docs/event-log.md, "Live forwarding"):

* syslog: RFC 5424, ``<PRI>1 TIMESTAMP HOST APP PID TYPE [meta sequenceId]
  [origin software swVersion] [abhed@32473 seq hash prev session sseq type
  class activity] MSG``, MSG being the event's OCSF record as JSON (MSG-ANY,
  no BOM: a BOM would break the SIEM's JSON parsers);
* journald: the native protocol (``FIELD=value`` lines, the length-prefixed
  form for values holding a newline) with ``MESSAGE``, ``PRIORITY``,
  ``SYSLOG_FACILITY``, ``SYSLOG_IDENTIFIER``, ``ABHED_*`` (the chain) and
  ``OCSF_RECORD``.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from appliance.events._models import LOG_SESSION, Event, ForwardingChanged
from appliance.events._ocsf import OcsfMapper, request_record
from appliance.events._settings import FACILITIES, ForwardSettings

if TYPE_CHECKING:  # a type only: events import no model service (docs/performance.md)
    from models import StoredRequest

__all__ = ["Forwarder", "BACKLOG_MAX", "CLOSE_WAIT_S", "NOTE_INTERVAL_S"]

BACKLOG_MAX = 1000  # messages kept for a collector that is down (at most ~8 MiB at 8 KiB each)
NOTE_INTERVAL_S = 60.0  # at most one "interrupted" record a minute per process
CLOSE_WAIT_S = 2.0
"""How long closing the log waits for a slow collector (its socket's queue full) to take
the backlog and the last note: a process that ends must not strand its last events at a
collector that is only busy, nor hang on one that is gone (that fails at once)."""
# Caps tried in turn until a record fits max_message_bytes (text chars, JSON bytes).
_CAPS = ((2048, 4096), (512, 1024), (128, 256), (32, 64))
# OCSF severity_id -> syslog severity: Informational=info, Low=notice, Medium=warning, High=err.
_SYSLOG_SEVERITY = {1: 6, 2: 5, 3: 4, 4: 3, 5: 2, 6: 0}
_META_MAX = 2_147_483_647  # RFC 5424 meta sequenceId's range


@dataclass
class _Tally:
    """One outage (or several folded together by the rate limit)."""

    error: str = ""
    since: str = ""
    outages: int = 0
    missed: int = 0
    replayed: int = 0
    lost: int = 0
    first: int | None = None
    last: int | None = None
    recorded: bool = False

    def merge(self, other: _Tally) -> None:
        self.outages += other.outages
        self.missed += other.missed
        self.replayed += other.replayed
        self.lost += other.lost
        self.first = other.first if self.first is None else self.first
        self.last = other.last if other.last is not None else self.last
        self.error = self.error or other.error
        self.since = self.since or other.since


@dataclass
class _Sent:
    seq: int
    data: bytes
    late: bool = field(default=False)


def _sd_value(value: object) -> str:
    """An RFC 5424 PARAM-VALUE: backslash before ``\\``, ``"`` and ``]``."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def _hostname() -> str:
    name = "".join(c for c in socket.gethostname() if "!" <= c <= "~")[:255]
    return name or "-"


class Forwarder:
    """Sends each stored event to one collector; reports when the link changes state."""

    def __init__(self, settings: ForwardSettings, log_name: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.destination = f"{settings.to}:{settings.path}"
        self._mapper = OcsfMapper(log_name=log_name)
        self._clock = clock
        self._host = _hostname()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.setblocking(False)
        self._backlog: deque[_Sent] = deque()
        self._down: _Tally | None = None
        self._unreported = _Tally()
        self._last_note = float("-inf")

    # -- what the store calls ------------------------------------------------
    def forward(self, seq: int, session_seq: int, prev_hash: str, hash: str,
                event: Event) -> list[Event]:
        """Send one appended event (and any backlog first); the events to record, if any."""
        data = self.encode(seq=seq, session_seq=session_seq, prev_hash=prev_hash, hash=hash,
                           event=event)
        return self._push(seq, event.ts, data)

    def forward_request(self, stored: StoredRequest) -> list[Event]:
        """Send one record of the model service's request log, as :meth:`forward` an event.

        The link's state changes come back as events for the caller to report
        (the model service has no event log of its own to keep them in)."""
        return self._push(stored.seq, stored.record.ended_at, self.encode_request(stored))

    def _push(self, seq: int, ts: str, data: bytes) -> list[Event]:
        self._backlog.append(_Sent(seq, data))
        while len(self._backlog) > BACKLOG_MAX:
            self._backlog.popleft()
            assert self._down is not None  # the backlog only grows while sends fail
            self._down.lost += 1
        error = self._flush()
        now = self._clock()
        if error is None:
            if self._down is None:
                return []
            down, self._down = self._down, None
            self._unreported.merge(down)
            if down.recorded or now - self._last_note >= NOTE_INTERVAL_S:
                return [self._note("restored")]
            return []
        if self._down is None:
            self._down = _Tally(error=error, since=ts, outages=1, first=seq)
        self._down.missed += 1
        self._down.last = seq
        if not self._down.recorded and now - self._last_note >= NOTE_INTERVAL_S:
            self._down.recorded = True
            self._last_note = now
            folded = self._unreported.outages
            return [ForwardingChanged(session_id=LOG_SESSION, destination=self.destination,
                                      state="interrupted", error=error, since=self._down.since,
                                      outages=folded + 1, first_missed_seq=seq)]
        return []

    def last_word(self) -> list[Event]:
        """The notes to record when the log is closed: an outage still on, or short ones
        unrecorded.  The backlog is first given :data:`CLOSE_WAIT_S` to drain, so a collector
        that was only slow gets every event and the outage ends "restored"; the caller sends
        that note on (:meth:`forward`) before :meth:`close`."""
        if self._backlog and self._drain() is None and self._down is not None:
            down, self._down = self._down, None
            self._unreported.merge(down)
        notes: list[Event] = []
        if self._down is not None:
            self._down.lost += len(self._backlog)
            self._backlog.clear()
            self._unreported.merge(self._down)
            self._down = None
            notes.append(self._note("unrecovered"))
        elif self._unreported.outages:
            notes.append(self._note("restored"))
        return notes

    def close(self) -> None:
        """Give what is left (the last note) :data:`CLOSE_WAIT_S` to go, then close."""
        if self._backlog:
            self._drain()
        self._sock.close()

    def _drain(self) -> str | None:
        """:meth:`_flush`, each send waiting for room up to what is left of
        :data:`CLOSE_WAIT_S` (a datagram socket's queue empties as the collector reads)."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        error: str | None = "not sent"
        while self._backlog and (left := deadline - time.monotonic()) > 0:
            self._sock.settimeout(left)
            try:
                error = self._flush()
            finally:
                self._sock.setblocking(False)
            if error is not None:
                break
        return error if self._backlog else None

    # -- sending ---------------------------------------------------------------
    def _flush(self) -> str | None:
        """Send the backlog in order; the first failure's reason, or None when all went."""
        while self._backlog:
            item = self._backlog[0]
            try:
                self._sock.sendto(item.data, self.settings.path)
            except OSError as exc:
                return f"{exc.strerror or exc} ({self.settings.path})"
            self._backlog.popleft()
            if self._down is not None and self._backlog:
                self._down.replayed += 1  # sent late: it waited for the collector
        return None

    def _note(self, state: str) -> ForwardingChanged:
        t, self._unreported = self._unreported, _Tally()
        self._last_note = self._clock()
        return ForwardingChanged(
            session_id=LOG_SESSION, destination=self.destination, state=state,  # type: ignore[arg-type]
            error=t.error, since=t.since, outages=t.outages, missed=t.missed,
            replayed=t.replayed, lost=t.lost, first_missed_seq=t.first, last_missed_seq=t.last)

    # -- the wire --------------------------------------------------------------
    def encode(self, *, seq: int, session_seq: int, prev_hash: str, hash: str,
               event: Event) -> bytes:
        """The message for one event, within ``max_message_bytes`` (values cut to fit)."""
        params = {"seq": seq, "hash": hash, "prev": prev_hash, "session": event.session_id,
                  "sseq": session_seq, "type": event.type}
        journal = {"ABHED_SEQ": seq, "ABHED_HASH": hash, "ABHED_PREV_HASH": prev_hash,
                   "ABHED_SESSION_ID": event.session_id, "ABHED_SESSION_SEQ": session_seq,
                   "ABHED_TYPE": event.type, "ABHED_TS": event.ts}
        return self._fit(lambda text_cap, data_cap: self._mapper.record(
            seq=seq, session_seq=session_seq, prev_hash=prev_hash, hash=hash, event=event,
            text_cap=text_cap, data_cap=data_cap), seq, event.ts, event.type, params, journal)

    def encode_request(self, stored: StoredRequest) -> bytes:
        """The message for one model-side request record (docs/model-service.md)."""
        r = stored.record
        params = {"seq": stored.seq, "hash": stored.hash, "prev": stored.prev_hash,
                  "session": r.session_id or "-", "request": r.request_id or "-",
                  "host": r.host, "engineer": r.engineer, "type": "model_request"}
        journal = {"ABHED_SEQ": stored.seq, "ABHED_HASH": stored.hash,
                   "ABHED_PREV_HASH": stored.prev_hash, "ABHED_SESSION_ID": r.session_id or "",
                   "ABHED_REQUEST_ID": r.request_id or "", "ABHED_HOST": r.host,
                   "ABHED_ENGINEER": r.engineer, "ABHED_TYPE": "model_request",
                   "ABHED_TS": r.ended_at}
        return self._fit(lambda text_cap, data_cap: request_record(
            stored, log_name=self._mapper.log_name, product=self._mapper.product,
            text_cap=text_cap), stored.seq, r.ended_at, "model_request", params, journal)

    def _fit(self, make: Callable[[int, int], dict[str, Any]], seq: int, ts: str, msgid: str,
             params: dict[str, Any], journal: dict[str, Any]) -> bytes:
        limit = self.settings.max_message_bytes
        data = b""
        for text_cap, data_cap in _CAPS:
            record = make(text_cap, data_cap)
            extra = {"class": record["class_uid"], "activity": record["activity_id"]}
            if self.settings.to == "syslog":
                data = self._syslog(record, seq, ts, msgid, {**params, **extra})
            else:
                data = self._journal(record, {**journal, "OCSF_CLASS_UID": extra["class"],
                                              "OCSF_ACTIVITY_ID": extra["activity"]})
            if len(data) <= limit:
                return data
        return data[:limit]  # pathological (a huge log path): the header and chain data go first

    def _pri(self, record: dict[str, Any]) -> tuple[int, int]:
        severity = _SYSLOG_SEVERITY.get(int(record["severity_id"]), 6)
        return FACILITIES[self.settings.facility], severity

    def _syslog(self, record: dict[str, Any], seq: int, ts: str, msgid: str,
                params: dict[str, Any]) -> bytes:
        facility, severity = self._pri(record)
        sd = "".join([
            f'[meta sequenceId="{seq}"]' if 0 < seq <= _META_MAX else "",
            f'[origin software="abhed" swVersion="{_sd_value(record["metadata"]["product"]["version"])}"]',
            f"[{self.settings.sd_id} "
            + " ".join(f'{k}="{_sd_value(v)}"' for k, v in params.items()) + "]",
        ])
        header = (f"<{facility * 8 + severity}>1 {ts} {self._host} "
                  f"{self.settings.app_name} {os.getpid()} {msgid[:32]} {sd} ")
        body = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        return header.encode() + body.encode()

    def _journal(self, record: dict[str, Any], chain: dict[str, Any]) -> bytes:
        facility, severity = self._pri(record)
        fields = {
            "MESSAGE": f"{record['type_name']}: {record.get('message', '')}",
            "PRIORITY": severity, "SYSLOG_FACILITY": facility,
            "SYSLOG_IDENTIFIER": self.settings.app_name, **chain,
            "OCSF_RECORD": json.dumps(record, ensure_ascii=False, separators=(",", ":")),
        }
        out = bytearray()
        for name, value in fields.items():
            raw = str(value).encode()
            if b"\n" in raw:  # the binary-safe form: NAME \n, 64-bit LE length, bytes, \n
                out += name.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
            else:
                out += name.encode() + b"=" + raw + b"\n"
        return bytes(out)
