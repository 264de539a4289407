"""What redaction learned in one process, remembered for every later process of the session.

A redacting extension's rewrite teaches the :class:`Redactor` a passage (a
key, say) while one process runs; a later process of the same session (the
next ``abhed tool`` call, a resumed ``abhed run``) must not put that passage
on the record either, e.g. in the preimage an ``edit`` keeps.  So each
learned passage is remembered in ``STATE/redactions/SESSION.json`` as
:func:`passage_record` makes it (length, kinds of characters, a SHA-256
salted per session): enough to recognise the passage again, never the
passage.  The file is private (0600 in a 0700 folder), written atomically
under a lock, since several processes may share a session.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

from appliance.events._redact import Redactor, passage_record
from foundation import FoundationError, parse_document, read_regular

__all__ = ["LearnedRedactions"]

FORMAT = "abhed-learned-redactions/1"
_SESSION = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_MAX_RECORDS = 10_000
_MAX_FILE_BYTES = 64 << 20  # _MAX_RECORDS records of a salted hash and a few numbers each


class LearnedRedactions:
    """The remembered passages of each session, in one folder beside the log."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _file(self, session_id: str) -> Path | None:
        if not _SESSION.fullmatch(session_id) or session_id in (".", ".."):
            return None
        return self.folder / f"{session_id}.json"

    def _load(self, path: Path) -> dict[str, Any]:
        try:
            data = parse_document(read_regular(path, _MAX_FILE_BYTES, "learned passages"),
                                  what="learned passages", source=path, syntax="json")
        except (OSError, FoundationError):
            return {}  # missing or damaged: what this process learns is still remembered below
        return data if data.get("format") == FORMAT else {}

    def remember(self, session_id: str, passages: list[str]) -> None:
        """Add ``passages`` (learned just now) to the session's file."""
        path = self._file(session_id)
        if path is None or not passages:
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.folder / ".lock", "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                data = self._load(path)
                salt = str(data.get("salt") or secrets.token_hex(16))
                records = [r for r in data.get("passages") or [] if isinstance(r, dict)]
                known = {r.get("sha256") for r in records}
                for passage in passages:
                    record = passage_record(salt, passage)
                    if record["sha256"] not in known and len(records) < _MAX_RECORDS:
                        records.append(record)
                fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump({"format": FORMAT, "salt": salt, "passages": records}, out)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
        except OSError:
            # The disk refused: this process still redacts it; a later one may not.
            return

    def recall(self, session_id: str, redactor: Redactor) -> None:
        """Make ``redactor`` recognise what earlier processes of the session learned."""
        path = self._file(session_id)
        if path is None:
            return
        data = self._load(path)
        if data.get("salt") and isinstance(data.get("passages"), list):
            redactor.remember(str(data["salt"]), data["passages"])
