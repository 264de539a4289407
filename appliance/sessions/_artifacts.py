"""Blobs a session keeps whole beside its event log: cut outputs and preimages.

A bash output over the result cap is cut for the model, but kept here, so
the model pages it with ``read`` (path ``abhed:artifact/SHA256``) instead of
re-running a ten-minute test suite or a command that is not idempotent.
``write`` and ``edit`` keep the file's bytes before they change it here too,
which is what ``undo`` restores.

Layout: ``<store dir>/artifacts/<session id>/<sha256>`` plus ``<sha256>.json``
(kind, source, size).  Content-addressed, so a blob kept twice is stored
once; each session has its own directory, so a ref only ever resolves to the
session's own blobs; the event log records every ref by digest (in the
``observation`` whose call kept it), so an auditor can check a blob against
the log.  Bounded: one blob at most ``max_artifact_bytes``, a session at most
``max_session_bytes``; past that a blob is not kept and the tool says so.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from foundation import FoundationError, load_if_present
from tools import ARTIFACT_PREFIX, FoundArtifact

__all__ = ["ArtifactStore"]

_SHA = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


class _Meta(BaseModel):
    """``<sha256>.json`` beside each blob: what kept it (written by :meth:`ArtifactStore.keep`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = "output"
    source: str = ""
    bytes: int = 0


def _blocks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as src:
        yield from iter(lambda: src.read(_CHUNK), b"")


class ArtifactStore:
    """One session's artifacts; implements ``tools.ArtifactKeeper``."""

    def __init__(self, root: Path, session_id: str, *, max_artifact_bytes: int = 64 << 20,
                 max_session_bytes: int = 512 << 20,
                 redact: Callable[[str], str] | None = None) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", session_id) or session_id in (".", ".."):
            raise ValueError(f"not a session id: {session_id!r}")
        self.dir = root / session_id
        self.session_id = session_id
        self.max_artifact_bytes = max_artifact_bytes
        self.max_session_bytes = max_session_bytes
        self._used: int | None = None
        # The event log's redactor: a kept output is part of the record, so it is redacted;
        # a preimage holding a secret is not kept (undo needs it exact).
        self.redact = redact

    @classmethod
    def beside(cls, events_db: Path, session_id: str, *,
               redact: Callable[[str], str] | None = None, **limits: int) -> ArtifactStore:
        """The store for ``session_id`` next to the event log at ``events_db``."""
        return cls(events_db.parent / "artifacts", session_id, redact=redact, **limits)

    def used_bytes(self) -> int:
        if self._used is None:
            try:
                self._used = sum(e.stat().st_size for e in os.scandir(self.dir)
                                 if _SHA.fullmatch(e.name))
            except FileNotFoundError:
                self._used = 0
        return self._used

    # -- ArtifactKeeper ----------------------------------------------------
    def keep(self, data: bytes | None = None, *, path: str | None = None, kind: str,
             source: str = "") -> dict[str, Any] | None:
        """Keep ``data`` (or the file at ``path``); None when over a bound or the disk refuses."""
        if (data is None) == (path is None):
            raise ValueError("give exactly one of data and path")
        if self.redact is not None:
            try:
                if path is not None:
                    if os.stat(path).st_size > self.max_artifact_bytes:
                        return None
                    data, path = Path(path).read_bytes(), None
            except OSError:
                return None
            assert data is not None
            text = data.decode("utf-8", "surrogateescape")
            clean = self.redact(text)
            if clean != text:
                if kind != "output":
                    # A preimage must stay exact (undo writes it back), so one holding a
                    # redacted secret is not kept at all: undo then refuses that file.
                    return None
                data = clean.encode("utf-8", "surrogateescape")
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
            try:
                digest = hashlib.sha256()
                written = 0
                with os.fdopen(fd, "wb") as out:
                    blocks: Iterable[bytes] = [data] if data is not None else _blocks(path or "")
                    for block in blocks:
                        written += len(block)
                        if written > self.max_artifact_bytes:
                            return None
                        digest.update(block)
                        out.write(block)
                sha = digest.hexdigest()
                final = self.dir / sha
                if not final.exists():
                    if self.used_bytes() + written > self.max_session_bytes:
                        return None
                    os.replace(tmp, final)
                    self._used = self.used_bytes() + written
                    meta = _Meta(kind=kind, source=source, bytes=written)
                    (self.dir / f"{sha}.json").write_text(meta.model_dump_json(), encoding="utf-8")
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        except OSError:
            return None
        return {"ref": ARTIFACT_PREFIX + sha, "sha256": sha, "bytes": written, "kind": kind,
                "source": source}

    def find(self, ref: str) -> FoundArtifact | None:
        """This session's artifact ``ref`` (its file, source and kind); None for anything else."""
        if not ref.startswith(ARTIFACT_PREFIX):
            return None
        sha = ref[len(ARTIFACT_PREFIX):]
        if not _SHA.fullmatch(sha):
            return None
        blob = self.dir / sha
        if not blob.is_file():
            return None
        try:
            meta = load_if_present(self.dir / f"{sha}.json", _Meta, what="artifact record",
                                   cap=1 << 16) or _Meta()
        except (OSError, FoundationError):
            meta = _Meta()  # the blob is what was kept; its label is only a help
        return FoundArtifact(str(blob), meta.source, meta.kind)

    def read(self, sha256: str) -> bytes | None:
        """The bytes of one of this session's blobs (for undo), or None."""
        found = self.find(ARTIFACT_PREFIX + sha256)
        if found is None:
            return None
        try:
            return Path(found.path).read_bytes()
        except OSError:
            return None
