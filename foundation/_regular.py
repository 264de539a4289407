"""Open a path someone named, refusing anything but a regular file, without hanging.

``open(path, "rb")`` on a named pipe (FIFO) blocks until some writer opens the
other end, so checking the file type *after* opening (``fstat``) is too late,
and checking with ``stat`` *before* opening races with a rename.  So the file
is opened with ``O_NONBLOCK`` (which returns at once for a FIFO), checked with
``fstat`` on the very descriptor that will be read, and only then switched
back to blocking reads.  ``O_NOCTTY`` keeps a terminal device from becoming
our controlling terminal on the way.  Devices (``/dev/zero``), directories and
sockets are refused by the same check.

:func:`open_regular_fd` is the mechanism (``OSError`` from ``open`` is left to
the caller, who words it for its reader: the model, an operator);
:func:`open_regular` and :func:`read_regular` word it for an operator.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from foundation._errors import FileMissing, FileRefused

__all__ = ["NotRegularFile", "open_regular", "open_regular_fd", "read_regular"]

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegularFile(FileRefused, OSError):
    """The path opened, but is a FIFO, a device, a directory or a socket (``kind`` says which).

    Also an ``OSError``: code that handles a file it could not open handles this too.
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular_fd(path: str | Path, *, what: str = "file", dir_fd: int | None = None,
                    follow_symlinks: bool = True) -> int:
    """A blocking read-only descriptor for ``path``, if and only if it is a regular file.

    ``dir_fd`` opens ``path`` relative to a directory descriptor, and
    ``follow_symlinks=False`` refuses a final symlink (``ELOOP``), as the tools
    do for a path they resolved themselves.

    Raises:
        OSError: from ``open`` (missing, permission, a symlink refused): the caller words it.
        NotRegularFile: it opened but is not a regular file; never blocks on a FIFO.
    """
    flags = _FLAGS | (0 if follow_symlinks else os.O_NOFOLLOW)
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _kind(mode)
            raise NotRegularFile(f"{what} {path} is {kind}, not a regular file: refused", kind)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str | Path, what: str = "file") -> BinaryIO:
    """Open ``path`` for binary reading if, and only if, it is a regular file.

    Raises:
        FileMissing: no such file.
        FileRefused: unreadable, or not a regular file (named: a FIFO, a device,
            a directory...); never blocks on a FIFO.
    """
    try:
        fd = open_regular_fd(path, what=what)
    except NotRegularFile:
        raise
    except FileNotFoundError:
        raise FileMissing(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise NotRegularFile(f"{what} {path} is a directory, not a regular file: refused",
                             "a directory") from None
    except OSError as exc:
        raise FileRefused(f"{what} {path}: cannot open ({exc.strerror})") from None
    return os.fdopen(fd, "rb")


def read_regular(path: str | Path, cap: int, what: str = "file") -> bytes:
    """The whole content of a regular file of at most ``cap`` bytes (refused if larger)."""
    with open_regular(path, what) as fh:
        try:
            data = fh.read(cap + 1)
        except OSError as exc:
            raise FileRefused(f"{what} {path}: cannot read ({exc.strerror})") from None
    if len(data) > cap:
        raise FileRefused(f"{what} {path} is larger than {cap} bytes: refused")
    return data
