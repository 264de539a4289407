"""A file's SHA-256, streamed: the one way every package hashes a file."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from foundation._regular import open_regular_fd

__all__ = ["CHUNK_BYTES", "FileDigest", "digest_file"]

CHUNK_BYTES = 1 << 20  # large enough that hashing, not the read calls, is the cost


class FileDigest(NamedTuple):
    """What was hashed: the hex SHA-256 and the number of bytes it covers (unpacks as a pair)."""

    sha256: str
    size: int


def digest_file(path: str | Path, progress: Callable[[int], None] | None = None) -> FileDigest:
    """The SHA-256 and size of the regular file at ``path``, read in 1 MiB blocks.

    ``progress`` is called with each block's length (for a progress bar over
    gigabytes of weights).  ``OSError`` is the caller's to word; a FIFO or a
    device put where a file was expected is refused at once
    (:class:`~foundation.NotRegularFile`, an ``OSError`` too), never read forever.
    """
    h = hashlib.sha256()
    size = 0
    with os.fdopen(open_regular_fd(path), "rb") as fh:
        while block := fh.read(CHUNK_BYTES):
            h.update(block)
            size += len(block)
            if progress is not None:
                progress(len(block))
    return FileDigest(h.hexdigest(), size)
