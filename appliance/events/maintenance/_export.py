"""``abhed events export`` and ``verify --file``: the record in a form an auditor takes away.

The file is JSON Lines (docs/event-log.md, "Export format"): one line per
event with every stored column (``body`` is the exact hashed text), then one
last line ``{"manifest": {...}}``.  A filtered export (``--session``) keeps
the chain checkable by putting, for each event it leaves out, a line with
only ``seq``, ``prev_hash``, ``hash`` and ``"withheld": true``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from appliance._errors import ChainBroken
from appliance.events._models import EVENT_ADAPTER, migrate, now_iso
from appliance.events._ocsf import OcsfMapper, export_record
from appliance.events._schema import Row
from appliance.events._store import EventStore
from appliance.events.maintenance._chain import ChainWalker

__all__ = ["EXPORT_FORMAT", "EXPORT_FORMATS", "ExportCheck", "consistency_problems", "export_log",
           "verify_export"]

EXPORT_FORMAT = "abhed-export-1"
EXPORT_FORMATS = ("jsonl", "ocsf")
_MAX_LINE = 64 << 20  # one event's line; the store caps nothing, but a hostile file must not OOM us


def export_log(store: EventStore, out: Path, *, session: str | None = None,
               since: str | None = None, fmt: str = "jsonl") -> dict[str, Any]:
    """Write the export to ``out`` (atomically, by rename); returns the manifest.

    ``fmt="ocsf"`` writes one OCSF record per event instead of the stored row
    (docs/event-log.md, "OCSF for the SIEM"): the other sessions' events of a
    ``--session`` export are left out rather than withheld (a SIEM has no use
    for a bare hash), and the manifest is the last record, an Event Log
    Activity "Export", so that every line is an OCSF record.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    mapper = OcsfMapper(log_name=str(store.path)) if fmt == "ocsf" else None
    head_seq, head_hash = store.head()
    tmp = out.with_name(out.name + ".part")
    first: Row | None = None
    last: Row | None = None
    count = withheld = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for row in store.rows():
            if row.seq > head_seq:
                break  # appended while we export: the manifest's head is where we stopped
            if first is None and since is not None and row.ts < since:
                continue
            if first is None:
                first = row
            last = row
            if session is not None and row.session_id != session:
                if mapper is None:
                    _line(fh, {"seq": row.seq, "withheld": True, "prev_hash": row.prev_hash,
                               "hash": row.hash})
                withheld += 1
                continue
            if mapper is None:
                _line(fh, row.as_json())
            else:
                event = EVENT_ADAPTER.validate_python(migrate(json.loads(row.body)))
                _line(fh, mapper.record(seq=row.seq, session_seq=row.session_seq,
                                        prev_hash=row.prev_hash, hash=row.hash, event=event))
            count += 1
        manifest = {
            "format": EXPORT_FORMAT if mapper is None else "abhed-ocsf-export-1",
            "exported_at": now_iso(), "log": str(store.path),
            "filter": {"session": session, "since": since},
            "complete": session is None and since is None and (first is None or first.prev_hash
                                                               == "0" * 64),
            "events": count, "withheld": withheld,
            "first_seq": first.seq if first else None,
            "first_prev_hash": first.prev_hash if first else None,
            "last_seq": last.seq if last else None, "last_hash": last.hash if last else None,
            "head_seq": head_seq, "head_hash": head_hash,
        }
        _line(fh, {"manifest": manifest} if mapper is None else export_record(mapper, manifest))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out)
    return manifest


def _line(fh: IO[str], value: dict[str, Any]) -> None:
    fh.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")


@dataclass
class ExportCheck:
    """What ``verify --file`` found: the manifest, and every problem (empty: it verifies)."""

    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    problems: list[str] = field(default_factory=list)
    hashes: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


_ROW_KEYS = {"seq", "session_id", "session_seq", "type", "ts", "prev_hash", "hash", "body"}


def verify_export(path: Path) -> ExportCheck:
    """Re-check an export's chain and manifest without the log; never raises on bad input."""
    check = ExportCheck(path)
    try:
        # O_NONBLOCK: a FIFO or device named as the export must not hang verify.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        check.problems.append(f"cannot read {path}: {exc.strerror or exc}")
        return check
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        check.problems.append(f"{path} is not a regular file: an export is a JSONL file")
        return check
    os.set_blocking(fd, True)
    fh = os.fdopen(fd, "r", encoding="utf-8", errors="strict")
    walker: ChainWalker | None = None
    try:
        with fh:
            for number, line in enumerate(iter(lambda: fh.readline(_MAX_LINE), ""), 1):
                if not line.endswith("\n"):
                    check.problems.append(f"line {number} is cut short or longer than "
                                          f"{_MAX_LINE} bytes")
                    return check
                if check.manifest:
                    check.problems.append(f"line {number} follows the manifest")
                    return check
                value = json.loads(line)
                if not isinstance(value, dict):
                    check.problems.append(f"line {number} is not a JSON object")
                    return check
                if "manifest" in value and isinstance(value["manifest"], dict):
                    check.manifest = value["manifest"]
                    continue
                if walker is None:
                    walker = ChainWalker(seq=int(value.get("seq", 1)) - 1,
                                         head=str(value.get("prev_hash", "")),
                                         sessions_from_first_seen=True)
                if value.get("withheld") is True:
                    walker.skip(int(value["seq"]), str(value["prev_hash"]), str(value["hash"]))
                elif set(value) == _ROW_KEYS:
                    row = Row(**value)
                    walker.feed(row)
                    check.events += 1
                else:
                    check.problems.append(f"line {number} is neither an event nor a manifest")
                    return check
                check.hashes[walker.seq] = walker.head
    except ChainBroken as exc:
        check.problems.append(f"BROKEN at event {exc.seq}: {exc.reason}")
        return check
    except (ValueError, TypeError, KeyError) as exc:
        check.problems.append(f"not an Abhed export ({type(exc).__name__}: {exc})")
        return check
    check.problems.extend(_manifest_problems(check, walker))
    return check


def _manifest_problems(check: ExportCheck, walker: ChainWalker | None) -> list[str]:
    m = check.manifest
    if not m:
        return ["the manifest (the last line) is missing: the file was cut short"]
    if m.get("format") != EXPORT_FORMAT:
        return [f"unknown export format {m.get('format')!r}"]
    seen = (walker.seq, walker.head) if walker else (None, None)
    problems: list[str] = []
    if seen != (m.get("last_seq"), m.get("last_hash")):
        problems.append(f"the manifest says the last event is {m.get('last_seq')} "
                        f"{str(m.get('last_hash'))[:12]}…, the file ends at {seen[0]}")
    if m.get("events") != check.events:
        problems.append(f"the manifest counts {m.get('events')} events, the file has {check.events}")
    if m.get("head_seq") == m.get("last_seq") and m.get("head_hash") != m.get("last_hash"):
        problems.append("the manifest's head is not the last event's hash")
    return problems


def consistency_problems(earlier: ExportCheck, later: ExportCheck) -> list[str]:
    """Certificate-Transparency style: where two exports overlap, they must hold the same hashes."""
    problems = []
    for seq in sorted(set(earlier.hashes) & set(later.hashes)):
        if earlier.hashes[seq] != later.hashes[seq]:
            problems.append(f"{earlier.path.name} and {later.path.name} disagree at event {seq}: "
                            "the log was rewritten between them")
            break
    if not problems and earlier.hashes and later.hashes and \
            max(later.hashes) < max(earlier.hashes):
        problems.append(f"{later.path.name} ends before {earlier.path.name}: the log was cut short")
    return problems

