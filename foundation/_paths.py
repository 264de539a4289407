"""Whether a path lies inside a root: the one spelling of it."""

from __future__ import annotations

import os

__all__ = ["is_within"]


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True when ``path`` is ``root`` or lies beneath it, compared as written.

    Both must be absolute and already normalized (resolved, if symlinks matter):
    this compares components, never touching the disk, so ``/ws-other`` is not
    inside ``/ws`` and ``/`` contains every absolute path.
    """
    p, r = os.fspath(path), os.fspath(root)
    if r != "/":
        r = r.rstrip("/")
    return p == r or p.startswith(r if r.endswith("/") else r + "/")
