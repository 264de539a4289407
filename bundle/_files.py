"""Open a path the operator named, refusing anything but a regular file, without hanging.

``open(path, "rb")`` on a named pipe (FIFO) blocks until some writer opens the
other end, so checking the file type *after* opening (``fstat``) is too late:
``abhed bundle verify some-fifo`` used to hang until killed.  Checking with
``stat`` *before* opening races with a rename.  So the file is opened with
``O_NONBLOCK`` (which returns at once for a FIFO), checked with ``fstat`` on
the very descriptor that will be read, and only then switched back to blocking
reads.  ``O_NOCTTY`` keeps a terminal device from becoming our controlling
terminal on the way.  Devices (``/dev/zero``), directories and sockets are
refused by the same check.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

from ._errors import BundleError

__all__ = ["open_regular", "read_regular"]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path | str, what: str = "file") -> BinaryIO:
    """Open ``path`` for binary reading if, and only if, it is a regular file.

    Raises:
        BundleError: missing, unreadable, or not a regular file (named: a FIFO,
            a device, a directory...); never blocks on a FIFO.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise BundleError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise BundleError(f"{what} {path} is a directory, not a regular file") from None
    except OSError as exc:
        raise BundleError(f"{what} {path}: cannot open ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BundleError(f"{what} {path} is {_kind(mode)}, not a regular file: refused")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path | str, cap: int, what: str = "file") -> bytes:
    """The whole content of a regular file of at most ``cap`` bytes (refused if larger)."""
    with open_regular(path, what) as fh:
        try:
            data = fh.read(cap + 1)
        except OSError as exc:
            raise BundleError(f"{what} {path}: cannot read ({exc.strerror})") from None
    if len(data) > cap:
        raise BundleError(f"{what} {path} is larger than {cap} bytes: refused")
    return data
