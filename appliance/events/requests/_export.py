"""The model service's request record leaving the host: JSONL (re-verifiable) or OCSF."""

from __future__ import annotations

import json
import os
from pathlib import Path

from appliance.events._ocsf import OcsfMapper, request_record
from models import RequestLogError, read_requests

__all__ = ["export_requests"]


def export_requests(record: Path, out: Path, *, fmt: str = "jsonl") -> int:
    """Verify the whole record, then write it to ``out`` atomically; how many records.

    ``jsonl`` writes the stored rows (``read_requests`` and ``abhed events
    join`` re-verify them); ``ocsf`` one OCSF 1.8.0 API Activity record each,
    for the SIEM, as ``abhed events export --format ocsf`` does for events.
    """
    if fmt not in ("jsonl", "ocsf"):
        raise ValueError(f"unknown export format {fmt!r}; choose jsonl or ocsf")
    stored = read_requests(record)
    product = OcsfMapper(log_name=str(record)).product
    tmp = out.with_name(f".{out.name}.part-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for s in stored:
                line = (s.as_json() if fmt == "jsonl"
                        else request_record(s, log_name=str(record), product=product))
                fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RequestLogError(f"cannot write {out}: {exc.strerror or exc}") from None
    return len(stored)
