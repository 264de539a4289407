"""Undo as a history: each undo walks one run further back, and a redo puts the last undo back.

What ``write`` and ``edit`` changed is known exactly from the log: each
successful call's observation has the path, the hash before and after, and
(for a replaced file) the preimage kept as an artifact.  Subagents' changes
count for the run whose ``task`` call spawned them.  What bash did is not in
that record and cannot be undone this way: the result says how many bash
calls ran.

The history is a fold of the session's ``undo_applied`` events, so every door
(``abhed sessions undo|redo``, rpc ``undo``/``redo``, the TUI's ``/undo`` and
``/redo``) and every process sees the same one:

* an **undo** takes the newest run that is not undone yet and changed a file
  (``after_turn=N``: every run after the N-th that is not undone yet) and puts
  each file back as it was before those runs: the first change in the range
  says what to restore (the preimage, or delete a file the run created), the
  last says what the file must hold now;
* a **redo** reverses the newest undo still in effect: each file goes back to
  what that undo replaced, which the undo kept (content-addressed) first.

A file whose current hash is not the one expected changed since (a person,
a command) and is refused by name with both hashes; then nothing at all is
restored (all or nothing).  The refusal says what can be done: undo again
``overwrite``-ing that file (its current content is kept too, so a redo
brings it back) or ``skip``-ping it (left as it is, the rest undone).  Every
undo and redo is an ``undo_applied`` event (``kind``), which the model is told
about at its next turn.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field

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
from foundation import NotRegularFile, digest_file

__all__ = ["UndoError", "UndoHistory", "redo", "undo", "undo_history"]

_NEW_FILE_MODE = 0o644


class UndoError(AbhedError):
    """Nothing to undo or redo, or the turn asked for does not exist (the message says which)."""


@dataclass
class _Touch:
    """One successful write/edit, as its observation recorded it."""

    path: str
    created: bool
    before: str | None  # sha256 before the change (None: the file did not exist)
    after: str
    store: ArtifactStore  # where its preimage was kept (the session's, or a subagent's)


@dataclass
class _Run:
    touches: list[_Touch] = field(default_factory=list)
    bash: int = 0


@dataclass(frozen=True)
class UndoHistory:
    """Where a session's undo history stands: what an undo or a redo would do next."""

    runs: list[str]
    undone: list[UndoApplied]  # undos in effect, oldest first (the top is what redo reverses)
    changed: dict[str, list[str]]  # run id -> files its write/edit calls changed (subagents' too)

    @property
    def undoable(self) -> list[str]:
        """Runs not undone, oldest first."""
        gone = {r for u in self.undone for r in u.run_ids}
        return [r for r in self.runs if r not in gone]

    @property
    def next_undo(self) -> str | None:
        """The run a plain undo would take: the newest not undone that changed a file."""
        changed = [r for r in self.undoable if self.changed.get(r)]
        return changed[-1] if changed else None

    @property
    def next_redo(self) -> UndoApplied | None:
        """The undo a redo would reverse (None: no undo is in effect)."""
        return self.undone[-1] if self.undone else None


# What _sha says of a FIFO, socket or device where the session's file was: never equal
# to a digest the log holds, so undo refuses it as changed (opening it would block).
NOT_A_FILE = "not-a-regular-file"


def _sha(path: str) -> str | None:
    try:
        return digest_file(path).sha256
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except NotRegularFile:
        return None if os.path.isdir(path) else NOT_A_FILE


def _store(session: Session, session_id: str) -> ArtifactStore:
    """A session's artifacts, redacted as the log is: a blob holding a redacted secret is not kept."""
    redactor = session.store.redactor
    return ArtifactStore.beside(session.store.path, session_id,
                                redact=redactor.text if redactor else None)


def _fold(session: Session) -> tuple[list[str], dict[str, _Run], list[UndoApplied]]:
    """Runs in order, what each changed (its subagents' changes included), undos in effect."""
    runs: list[str] = []
    per_run: dict[str, _Run] = {}
    stack: list[UndoApplied] = []
    pending: list[tuple[str, str | None]] = [(session.id, None)]  # (session, run it counts for)
    seen: set[str] = set()
    while pending:
        sid, owner = pending.pop(0)
        store = _store(session, sid)
        current = owner
        for stored in session.store.events(sid):
            e = stored.event
            if sid == session.id:
                if isinstance(e, RunStarted):
                    current = e.run_id
                    runs.append(current)
                    per_run[current] = _Run()
                elif isinstance(e, UndoApplied) and not any(f.action == "refused" for f in e.files):
                    if e.kind == "redo":
                        if stack:
                            stack.pop()
                    else:
                        stack.append(e)
            if current is None:
                continue
            if isinstance(e, TaskStarted) and e.child_session_id not in seen:
                seen.add(e.child_session_id)
                pending.append((e.child_session_id, current))
            if not isinstance(e, ObservationEvent):
                continue
            run = per_run.setdefault(current, _Run())
            if e.tool == "bash":
                run.bash += 1
                continue
            d = e.result.details
            if e.tool not in ("write", "edit") or not e.result.ok or not d.get("changed"):
                continue
            path, after, before = d.get("path"), d.get("sha256_after"), d.get("sha256_before")
            if isinstance(path, str) and isinstance(after, str):
                created = bool(d.get("created"))
                run.touches.append(_Touch(path, created,
                                          None if created or not isinstance(before, str) else before,
                                          after, store))
    return runs, per_run, stack


def undo_history(session: Session) -> UndoHistory:
    """The session's undo history: runs, undos in effect, what each run changed."""
    runs, per_run, stack = _fold(session)
    changed = {r: sorted({t.path for t in per_run[r].touches}) for r in runs if r in per_run}
    return UndoHistory(runs, stack, changed)


# -- putting files back ---------------------------------------------------------

@dataclass
class _Step:
    path: str
    expected: str | None  # what the file must hold now (None: must not exist)
    target: str | None  # the sha256 it goes back to (None: delete it)
    store: ArtifactStore  # where the target's bytes are kept
    mode: int | None = None  # a file recreated gets this mode


def _refused(path: str, now: str | None, why: str) -> FileRestore:
    return FileRestore(path=path, action="refused", sha256_before=now, reason=why)


def _changed_advice(path: str, now: str | None, expected: str | None, since: str,
                    verb: str) -> str:
    found = "it was deleted" if now is None else \
        "it is no longer a regular file (a FIFO, socket or device)" if now == NOT_A_FILE else \
        f"its sha256 is {now[:12]}…"
    wanted = "none" if expected is None else f"{expected[:12]}…"
    return (f"changed since {since} ({found}; expected {wanted}), by someone or something else. "
            f"To put it back anyway, {verb} again overwriting it (`--overwrite {path}`; rpc "
            f"\"overwrite\": [path]): its content now is kept, so it can be brought back. To "
            f"leave it as it is and put back the rest, skip it (`--skip {path}`; rpc \"skip\")")


def _apply(session: Session, steps: list[_Step], refused: list[FileRestore],
           skipped: Collection[str]) -> list[FileRestore]:
    """All or nothing: restore every step, or none when anything was refused."""
    files = [FileRestore(path=p, action="skipped", reason="left as it is, as asked")
             for p in sorted(skipped)]
    if refused:
        return files + refused + [
            FileRestore(path=s.path, action="refused", sha256_before=s.expected,
                        reason="not restored: another file here was refused (all or nothing)")
            for s in steps]
    keep = _store(session, session.id)
    for step in steps:
        mode = _mode(step.path)
        # What this replaces is kept first, so the next redo (or undo) can bring it back.
        kept = step.expected != NOT_A_FILE  # a FIFO or device is replaced, never read
        if step.expected not in (None, NOT_A_FILE):
            with open(step.path, "rb") as fh:
                kept = keep.keep(fh.read(), kind="preimage", source=step.path) is not None
        data = step.store.read(step.target) if step.target is not None else None
        _write(step.path, data, step.mode if mode is None else mode)
        files.append(FileRestore(
            path=step.path, action="deleted" if data is None else "restored",
            sha256_before=step.expected, sha256_after=step.target, mode=mode,
            reason="" if kept else "its content before this could not be kept (too large, or "
            "it held a redacted secret): a redo cannot bring it back"))
    return files


def _mode(path: str) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _write(path: str, data: bytes | None, mode: int | None) -> None:
    """Delete ``path`` (``data`` None) or replace it atomically, keeping ``mode``."""
    if data is None:
        if os.path.lexists(path):
            os.unlink(path)
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".abhed-undo-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _NEW_FILE_MODE if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _checked(path: str, expected: str | None, target: str | None, store: ArtifactStore,
             overwrite: Collection[str], since: str, verb: str, mode: int | None = None,
             ) -> _Step | FileRestore:
    """The step for one file, or why it is refused."""
    now = _sha(path)
    if now != expected and path not in overwrite:
        return _refused(path, now, _changed_advice(path, now, expected, since, verb))
    if target is not None and store.read(target) is None:
        return _refused(path, now, "the content to put back was not kept (over the 32 MiB "
                        f"preimage bound, or it held a redacted secret); skip it (`--skip {path}`; "
                        "rpc \"skip\") to put back the rest, and restore it by hand")
    if target is not None and not os.path.isdir(os.path.dirname(path)):
        return _refused(path, now, f"its directory {os.path.dirname(path)} no longer exists; "
                        f"create it, or skip the file (`--skip {path}`)")
    return _Step(path, now, target, store, mode)


def _split(items: list[_Step | FileRestore]) -> tuple[list[_Step], list[FileRestore]]:
    return ([i for i in items if isinstance(i, _Step)],
            [i for i in items if isinstance(i, FileRestore)])


def undo(session: Session, *, after_turn: int | None = None, overwrite: Collection[str] = (),
         skip: Collection[str] = (), requested_by: str = "cli") -> UndoApplied:
    """Undo the newest run not undone yet (or every run after the ``after_turn``-th); record it.

    ``overwrite``: files restored even though they changed since the session
    wrote them (their content now is kept, so a redo brings it back);
    ``skip``: files left as they are.  Raises :class:`UndoError` when there is
    nothing to undo or ``after_turn`` is out of range; refused files are in
    the returned event, not raised.
    """
    runs, per_run, stack = _fold(session)
    undone = {r for u in stack for r in u.run_ids}
    if not runs:
        raise UndoError(f"session {session.id} has no runs to undo")
    if after_turn is None:
        left = [r for r in runs if r not in undone]
        changed = [r for r in left if per_run[r].touches]
        if not left:
            raise UndoError(f"every run of session {session.id} is undone already; a redo puts "
                            "the last undo back")
        if not changed:
            bash = sum(per_run[r].bash for r in left)
            raise UndoError("nothing to undo: no run that is not undone yet changed a file with "
                            "write or edit" + (f" ({bash} bash calls ran; what bash did is not "
                                               "undone)" if bash else ""))
        chosen = changed[-1:]
    else:
        if not 0 <= after_turn < len(runs):
            raise UndoError(f"--to-turn must be between 0 and {len(runs) - 1} (the session has "
                            f"{len(runs)} runs); got {after_turn}")
        chosen = [r for r in runs[after_turn:] if r not in undone]
        if not chosen:
            raise UndoError(f"the runs after run {after_turn} are undone already; a redo puts "
                            "the last undo back")
        if not any(per_run[r].touches for r in chosen):
            # The same "nothing to undo" as without --to-turn, raised rather than recorded as
            # an empty undo: every door then says it the same way (the CLI exits 1), and no
            # undo that put nothing back lands on the history for a redo to take off.
            bash = sum(per_run[r].bash for r in chosen)
            raise UndoError(f"nothing to undo: no run after run {after_turn} that is not undone "
                            "yet changed a file with write or edit"
                            + (f" ({bash} bash calls ran; what bash did is not undone)"
                               if bash else ""))
    first: dict[str, _Touch] = {}
    last: dict[str, str] = {}
    for run in chosen:
        for touch in per_run[run].touches:
            first.setdefault(touch.path, touch)
            last[touch.path] = touch.after
    unknown = [t for t in first.values() if not t.created and t.before is None]
    items = [_checked(path, last[path], None if t.created else t.before, t.store, overwrite,
                      "this session wrote it", "undo")
             for path, t in first.items() if path not in skip and t not in unknown]
    steps, refused = _split(items)
    refused += [_refused(t.path, _sha(t.path), "the log does not say what it held before; skip "
                         f"it (`--skip {t.path}`) to put back the rest")
                for t in unknown if t.path not in skip]
    files = _apply(session, steps, refused, [p for p in skip if p in first])
    event = UndoApplied(session_id=session.id, kind="undo", requested_by=requested_by,
                        after_turn=after_turn, run_ids=chosen, files=files,
                        bash_calls_not_undone=sum(per_run[r].bash for r in chosen))
    session.append(event)
    return event


def redo(session: Session, *, overwrite: Collection[str] = (), skip: Collection[str] = (),
         requested_by: str = "cli") -> UndoApplied:
    """Reverse the newest undo still in effect: its files go back to what it replaced; record it.

    Raises :class:`UndoError` when no undo is in effect.  ``overwrite`` and
    ``skip`` are as for :func:`undo`.
    """
    _runs, _per_run, stack = _fold(session)
    if not stack:
        raise UndoError(f"nothing to redo: no undo of session {session.id} is in effect")
    top = stack[-1]
    keep = _store(session, session.id)
    put_back = [f for f in top.files if f.action in ("restored", "deleted") and f.path not in skip]
    steps, refused = _split([_checked(f.path, f.sha256_after, f.sha256_before, keep, overwrite,
                                      "the undo put it back", "redo", f.mode) for f in put_back])
    files = _apply(session, steps, refused,
                   [f.path for f in top.files if f.path in skip and f.action != "refused"])
    event = UndoApplied(session_id=session.id, kind="redo", requested_by=requested_by,
                        after_turn=top.after_turn, run_ids=top.run_ids, files=files,
                        bash_calls_not_undone=0)
    session.append(event)
    return event
