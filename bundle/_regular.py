"""Operator-named files, read as the bundle package reads them: its errors, foundation's rule.

The rule (a regular file only, never blocking on a FIFO, a size cap) lives in
``foundation``; here it speaks ``BundleError``, so every ``abhed bundle`` verb and the
installer catch one root.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import foundation

from ._errors import BundleError

__all__ = ["open_regular", "read_regular"]


def open_regular(path: Path | str, what: str = "file") -> BinaryIO:
    """Open ``path`` for binary reading if, and only if, it is a regular file.

    Raises:
        BundleError: missing, unreadable, or not a regular file (named: a FIFO,
            a device, a directory...); never blocks on a FIFO.
    """
    try:
        return foundation.open_regular(path, what)
    except foundation.FileRefused as exc:
        raise BundleError(str(exc)) from None


def read_regular(path: Path | str, cap: int, what: str = "file") -> bytes:
    """The whole content of a regular file of at most ``cap`` bytes (refused if larger)."""
    try:
        return foundation.read_regular(path, cap, what)
    except foundation.FileRefused as exc:
        raise BundleError(str(exc)) from None
