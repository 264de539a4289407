"""Helpers every test folder may use: waiting on a condition with a deadline; a scratch
directory another Unix user can pass through; a hard-linked copy of a source tree."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout_s: float = 30.0, *, poll_s: float = 0.02,
             what: str = "condition") -> T:
    """Poll ``cond`` until it returns something truthy; return that value.

    Tests never sleep for a fixed time (a slow CI machine makes that flaky, a
    fast one makes it wasteful): they wait on a condition, and a deadline turns
    "never" into a clear failure instead of a hung suite.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        pause.wait(poll_s)


@contextmanager
def shared_scratch(prefix: str) -> Iterator[Path]:
    """A root-owned 0755 directory in /tmp, removed after: pytest's own tmp_path is 0700,
    so the unprivileged users of a shared-host test could not pass through it."""
    base = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def link_tree(src: str | os.PathLike[str], dst: Path) -> Path:
    """A copy of the source tree ``src`` at ``dst`` (hard links where the file system allows,
    copies elsewhere), without site-packages, bytecode or build configuration; made once
    (an existing ``dst`` is kept).  The grep tests and benchmarks search such trees."""
    if not dst.exists():
        def cp(s: str, d: str) -> None:
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)

        shutil.copytree(src, dst, symlinks=True, copy_function=cp,
                        ignore=shutil.ignore_patterns("site-packages", "__pycache__", "config-*"))
    return dst.resolve()
