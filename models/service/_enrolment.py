"""Which engineers of this host the operator has enrolled for the model service.

The list is a small JSON file the installer writes (``abhed-installer engineer
enroll USER`` / ``engineer revoke USER``, root-owned); the relay re-reads it when
it changes, so a revocation holds from the next request, without a restart.
Each entry keeps the uid the name had when it was enrolled: a user deleted and
re-created under the same name with another uid is not the engineer the
operator enrolled, and is refused until enrolled again.

    {"format": "abhed-engineers/1",
     "engineers": {"alice": {"uid": 1001, "enrolled": "2026-12-04T13:00:00+00:00"}}}
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from models._site_tls import GATE_ENGINEER

__all__ = ["ENROLMENT_FORMAT", "Enrolment"]

ENROLMENT_FORMAT = "abhed-engineers/1"
_MAX_BYTES = 4 * 1024 * 1024


class Enrolment:
    """The enrolled engineers, from ``path``; fail closed when the file is unusable."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._uids: dict[str, int] = {}
        self._problem: str | None = None

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            with self._lock:
                self._stamp, self._uids, self._problem = None, {}, None
            return
        except OSError as exc:
            with self._lock:
                self._stamp, self._problem = None, f"{self.path}: {exc.strerror}"
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            if stamp == self._stamp:
                return
        uids: dict[str, int] = {}
        problem = None
        try:
            if st.st_size > _MAX_BYTES:
                raise ValueError(f"over {_MAX_BYTES} bytes")
            raw = json.loads(self.path.read_bytes())
            if not isinstance(raw, dict) or raw.get("format") != ENROLMENT_FORMAT:
                raise ValueError(f"not an {ENROLMENT_FORMAT} file")
            for name, entry in dict(raw.get("engineers") or {}).items():
                if isinstance(entry, dict) and isinstance(entry.get("uid"), int):
                    uids[str(name)] = int(entry["uid"])
        except (OSError, ValueError) as exc:
            problem = f"{self.path} is not usable ({exc})"
        with self._lock:
            self._stamp, self._uids, self._problem = stamp, uids, problem

    def check(self, user: str, uid: int) -> str | None:
        """None when ``user`` (uid ``uid``) is enrolled; else why not, for the refusal."""
        if user == GATE_ENGINEER:  # a Unix user of that name is not the installer's gate
            return (f"{user!r} is the name the installer's health gate is recorded under; no "
                    "engineer may use it")
        self._refresh()
        with self._lock:
            if self._problem is not None:
                return (f"the host's list of enrolled engineers is damaged ({self._problem}); "
                        "ask the operator to enroll you again (`abhed-installer engineer enroll`)")
            enrolled = self._uids.get(user)
        if enrolled is None:
            return (f"engineer {user!r} is not enrolled for the model service on this host (or "
                    "was revoked); ask the operator to run `abhed-installer engineer enroll "
                    f"{user}`")
        if enrolled != uid:
            return (f"user {user!r} now has uid {uid}, but was enrolled with uid {enrolled}: not "
                    "the same account; ask the operator to enroll it again")
        return None
