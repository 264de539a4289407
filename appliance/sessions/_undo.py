"""Undo: put back the files a session's last run (or every run after N) changed.

What ``write`` and ``edit`` changed is known exactly from the log: each
successful call's observation has the path, the hash before and after, and
(for a replaced file) the preimage kept as an artifact.  For each file the
first change in the range says what to restore (the preimage, or "did not
exist": delete it) and the last says what the file must hold now.  A file
whose current hash is not that one changed since (a person, a command, a
later tool) and is refused by name, with both hashes, rather than overwriting
someone's work; then nothing at all is restored, so an undo is all or
nothing.  Subagents' changes made during those runs count too.  What bash did
is not in that record and cannot be undone this way: the result says how
many bash calls ran.  Every undo is an ``undo_applied`` event.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass

from appliance._errors import AbhedError
from appliance._session import Session
from appliance.events import (
    FileRestore,
    ObservationEvent,
    RunStarted,
    TaskStarted,
    UndoApplied,
)
from appliance.sessions._artifacts import ArtifactStore

__all__ = ["UndoError", "undo"]


class UndoError(AbhedError):
    """Nothing to undo, or the turn asked for does not exist (the message says which)."""


@dataclass
class _Change:
    path: str
    created: bool  # the first change in the range created the file
    before: str | None  # sha256 to restore (None: did not exist)
    after: str  # sha256 the file must hold now
    store: ArtifactStore  # where the preimage was kept (the session, or a subagent's)


def _sha(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def _changes(session: Session, run_ids: set[str]) -> tuple[dict[str, _Change], int]:
    """Per file, the first and last change made in those runs (subagents' included); bash count."""
    changes: dict[str, _Change] = {}
    bash = 0
    sessions: list[tuple[str, bool]] = [(session.id, False)]
    seen_children: set[str] = set()
    while sessions:
        sid, whole = sessions.pop(0)
        store = ArtifactStore.beside(session.store.path, sid)
        current: str | None = None
        for stored in session.store.events(sid):
            e = stored.event
            if isinstance(e, RunStarted):
                current = e.run_id
            if not whole and current not in run_ids:
                continue
            if isinstance(e, TaskStarted) and e.child_session_id not in seen_children:
                seen_children.add(e.child_session_id)
                sessions.append((e.child_session_id, True))
            if not isinstance(e, ObservationEvent):
                continue
            if e.tool == "bash":
                bash += 1
                continue
            d = e.result.details
            if e.tool not in ("write", "edit") or not e.result.ok or not d.get("changed"):
                continue
            path, after = d.get("path"), d.get("sha256_after")
            if not isinstance(path, str) or not isinstance(after, str):
                continue
            if path in changes:
                changes[path].after = after
            else:
                created = bool(d.get("created"))
                before = None if created else d.get("sha256_before")
                changes[path] = _Change(path, created, before if isinstance(before, str) else None,
                                        after, store)
    return changes, bash


def _restore(change: _Change, data: bytes | None) -> None:
    if data is None:
        os.unlink(change.path)
        return
    directory = os.path.dirname(change.path)
    mode = stat.S_IMODE(os.stat(change.path).st_mode)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".abhed-undo-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, change.path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def undo(session: Session, *, after_turn: int | None = None, requested_by: str = "cli") -> UndoApplied:
    """Undo the last run's file changes (or every run after ``after_turn``); record and return it.

    Raises :class:`UndoError` when the session has no runs or ``after_turn``
    is out of range.  Refused files are in the returned event, not raised.
    """
    runs = [e.event.run_id for e in session.store.events(session.id, types=("run_started",))
            if isinstance(e.event, RunStarted)]
    if not runs:
        raise UndoError(f"session {session.id} has no runs to undo")
    if after_turn is None:
        chosen = runs[-1:]
    else:
        if not 0 <= after_turn < len(runs):
            raise UndoError(f"--to-turn must be between 0 and {len(runs) - 1} (the session has "
                            f"{len(runs)} runs); got {after_turn}")
        chosen = runs[after_turn:]
    changes, bash = _changes(session, set(chosen))
    files: list[FileRestore] = []
    plan: list[tuple[_Change, bytes | None]] = []
    for c in changes.values():
        now = _sha(c.path)
        if now != c.after:
            what = "it was deleted" if now is None else f"its sha256 is {now[:12]}…, not {c.after[:12]}…"
            files.append(FileRestore(path=c.path, action="refused", sha256_before=now,
                                     reason=f"changed since this session wrote it ({what}); "
                                            "restore it by hand or undo the later change first"))
            continue
        if c.created:
            plan.append((c, None))
            continue
        data = c.store.read(c.before) if c.before else None
        if data is None:
            files.append(FileRestore(path=c.path, action="refused", sha256_before=now,
                                     reason="its earlier content was not kept (too large, or the "
                                            "artifact is gone)"))
            continue
        plan.append((c, data))
    if not files:  # all or nothing: any refusal leaves every file as it is
        for c, data in plan:
            _restore(c, data)
            files.append(FileRestore(path=c.path, action="deleted" if data is None else "restored",
                                     sha256_before=c.after, sha256_after=c.before))
    else:
        files += [FileRestore(path=c.path, action="refused", sha256_before=c.after,
                              reason="not restored: another file in this undo was refused")
                  for c, _ in plan]
    event = UndoApplied(session_id=session.id, requested_by=requested_by, after_turn=after_turn,
                        run_ids=chosen, files=files, bash_calls_not_undone=bash)
    session.append(event)
    return event
