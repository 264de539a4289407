"""Transactions: act, remember how to undo, and undo everything on any exception.

As pipx does it: each step that changes the host registers its undo right
after it succeeds (remove the release directory, switch ``current`` back,
restore the unit file, rewrite the state).  On any exception, KeyboardInterrupt
and SIGTERM included, the undos run in reverse order with those signals
blocked, each one's outcome is recorded in the audit log, and the original
exception propagates.  ``commit()`` forgets the undos.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from ._audit import AuditLog
from ._layout import Layout
from ._proc import signals_blocked

__all__ = ["Step", "Transaction", "describe", "gc_store", "switch_current"]


def describe(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    text = str(exc) or type(exc).__name__
    return text[:2000]


C = TypeVar("C")


@dataclass(frozen=True)
class Step(Generic[C]):
    """One step of a transactional change to the host, pipx-style.

    ``do`` acts on the shared context; ``undo`` (with ``undo_label`` for the
    audit log) reverses it and is registered *before* ``do`` runs when
    ``undo_first`` (so a half-done step, a directory half unpacked, is undone
    too), else right after it succeeds.  ``faults`` names the fault points
    inside the step, in the order they are reached; ``after`` is the one the
    runner fires once ``do`` returned (it is also in ``faults``).
    """

    name: str
    do: Callable[[C], None]
    undo: Callable[[C], None] | None = None
    undo_label: Callable[[C], str | None] | None = None
    undo_first: bool = False
    faults: tuple[str, ...] = ()
    after: str | None = None


class Transaction:
    def __init__(self, audit: AuditLog, action: str, run: str, version: int | None) -> None:
        self._audit = audit
        self._action = action
        self._run = run
        self._version = version
        self._undo: list[tuple[str, Callable[[], None]]] = []

    def on_undo(self, label: str, fn: Callable[[], None]) -> None:
        self._undo.append((label, fn))

    def commit(self) -> None:
        self._undo.clear()

    def run(self, steps: tuple[Step[C], ...], ctx: C) -> None:
        """Run ``steps`` in order on ``ctx``, registering each one's undo; then commit.

        Any exception propagates to ``__exit__``, which undoes in reverse.
        """
        from ._faults import fault_point

        for step in steps:
            if step.undo_first:
                self._register(step, ctx)
            step.do(ctx)
            if not step.undo_first:
                self._register(step, ctx)
            if step.after is not None:
                fault_point(step.after)
        self.commit()

    def _register(self, step: Step[C], ctx: C) -> None:
        if step.undo is None:
            return
        label = step.undo_label(ctx) if step.undo_label is not None else step.name
        if label is not None:  # None: this run has nothing of this step's to undo
            self.on_undo(label, functools.partial(step.undo, ctx))

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None or not self._undo:
            return
        with signals_blocked():
            done: list[str] = []
            failed: list[str] = []
            for label, fn in reversed(self._undo):
                try:
                    fn()
                    done.append(label)
                except Exception as err:
                    failed.append(f"{label}: {err}")
            self._undo.clear()
            self._audit.append(self._action, "restore", "failed" if failed else "ok",
                               run=self._run, version=self._version, cause=describe(exc),
                               undone=done, undo_failed=failed or None)


def switch_current(layout: Layout, version: int | None) -> None:
    """Point ``current`` at ``releases/<version>`` (or remove it) by one atomic rename."""
    from ._faults import fault_point

    if version is None:
        layout.current.unlink(missing_ok=True)
        _fsync_dir(layout.prefix)
        return
    tmp = layout.prefix / f".current.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(f"releases/{version}", tmp)
    fault_point("switch")
    os.replace(tmp, layout.current)
    _fsync_dir(layout.prefix)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def gc_store(layout: Layout) -> int:
    """Remove store objects no release links to any more; how many were removed."""
    removed = 0
    try:
        names = os.listdir(layout.store)
    except FileNotFoundError:
        return 0
    for name in names:
        p = layout.store / name
        try:
            if p.stat().st_nlink <= 1:
                p.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        # Model files are read-only; rmtree can still unlink them (the directory is writable).
        shutil.rmtree(path)


def fields(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}
