"""Searching one file with RE2, as fast as Python allows.

What makes it fast (each measured, see docs/performance.md):

* RE2 runs over a whole buffer at a time, not line by line: one C call per
  chunk of up to 4 MiB, so Python's per-line cost disappears.
* The buffer is one reused ``bytearray`` filled with ``readv``: no
  allocation per file.
* When every match must contain one of a few literal strings, an RE2
  program per literal (``Query.prefilter``: RE2 skips to a literal with memchr
  on its first byte) finds the next occurrence and the pattern only runs on
  that line.
* Counting and listing stop at one match per line: after a match the search
  resumes on the next line, so a pattern that matches everywhere costs one
  call per line, not per match.

Memory is bounded: in line mode a file is read in chunks cut at a newline
(a single line longer than the chunk grows the buffer to hold it); multiline
mode needs the whole file in view, which is done with a read-only ``mmap``
for files larger than one chunk, so the data stays in the page cache instead
of the heap.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from typing import Any

from re2 import _re2

from tools._grep._engine import UTF8_BOM, MatchLine, sniff
from tools._grep._query import Query

__all__ = ["FileOutcome", "nowait_supported", "open_file", "search_cached", "search_fd", "search_file"]

CHUNK = 4 << 20
_MAX_LINE_BUFFER = 256 << 20
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOATIME", 0)
_NL = 10


class FileOutcome:
    """What one file gave: ``matched`` lines count (or 1 for 'any'), ``binary``, ``error``."""

    __slots__ = ("binary", "count", "error", "lines")

    def __init__(self, *, error: bool = False) -> None:
        self.count = 0
        self.binary = False
        self.error = error  # unreadable: nothing of it counts
        self.lines: list[MatchLine] = []


def _open(path: str) -> int:
    try:
        return os.open(path, _OPEN_FLAGS)
    except PermissionError:
        # O_NOATIME is refused on files we do not own; retry without it.
        return os.open(path, _OPEN_FLAGS & ~getattr(os, "O_NOATIME", 0))


def open_file(path: str) -> int:
    """The descriptor :func:`search_fd` wants for ``path`` (raises OSError)."""
    return _open(path)


def search_file(path: str, query: Query, mode: str, buf: bytearray, max_lines: int = 0) -> FileOutcome:
    """Search one file.  ``mode``: 'any' (stop at the first match), 'count', 'lines'."""
    try:
        fd = _open(path)
    except OSError:
        return FileOutcome(error=True)
    return search_fd(fd, query, mode, buf, max_lines)


def search_fd(fd: int, query: Query, mode: str, buf: bytearray, max_lines: int = 0) -> FileOutcome:
    """:func:`search_file` on a descriptor from :func:`open_file`, which it closes."""
    out = FileOutcome()
    try:
        _search_fd(fd, query, mode, buf, max_lines, out)
    except OSError:
        out.error = True
        out.count = 0
        out.lines = []
    finally:
        os.close(fd)
    return out


def search_cached(path: str, query: Query, mode: str, buf: bytearray) -> FileOutcome | None:
    """:func:`search_file` if the file's first chunk is all in the page cache, else None.

    The first read asks for cached data only (``preadv`` with ``RWF_NOWAIT``,
    Linux 4.14+); when it would block (or is short of the file's size, which it
    may be when part of the file is cached) nothing is searched and the caller
    searches the file the ordinary way.  This lets a warm-cache search run
    without the read-ahead thread, which only pays on a cold cache.
    """
    if not nowait_supported():
        return None
    try:
        fd = _open(path)
    except OSError:
        return FileOutcome(error=True)
    try:
        try:
            n = os.preadv(fd, [buf], 0, _RWF_NOWAIT)
        except BlockingIOError:
            return None
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                _NOWAIT_STATE[0] = False  # this kernel or file system cannot: stop asking
            return None
        if n < len(buf):
            # The size by lseek, not fstat: no stat object per file (most files end here).
            if n < os.lseek(fd, 0, os.SEEK_END):
                return None  # short: part of the file is not cached (or it grew)
        else:
            os.lseek(fd, n, os.SEEK_SET)  # the rest is read from here on
        out = FileOutcome()
        try:
            _search_fd(fd, query, mode, buf, 0, out, first=n)
        except OSError:
            out.error = True
            out.count = 0
            out.lines = []
        return out
    finally:
        os.close(fd)


_RWF_NOWAIT = getattr(os, "RWF_NOWAIT", 0)
_NOWAIT_STATE = [bool(_RWF_NOWAIT) and hasattr(os, "preadv")]


def nowait_supported() -> bool:
    return _NOWAIT_STATE[0]


def _search_fd(fd: int, q: Query, mode: str, buf: bytearray, max_lines: int, out: FileOutcome,
               first: int | None = None) -> None:
    n = os.readv(fd, [buf]) if first is None else first
    if n == 0:
        return
    final = n < len(buf)
    kind = sniff(buf, n)
    if kind.startswith("utf-16") or (kind == "utf-8-bom" and q.multiline and not final):
        # the text the file encodes, whole (rare files, and read decodes them the same way)
        raw = bytes(buf[:n]) + _rest(fd, n)
        if kind == "utf-8-bom":
            text = bytearray(raw[len(UTF8_BOM):])
        else:
            text = bytearray(raw[2:].decode(kind, "replace").encode("utf-8", "surrogateescape"))
        _search_text(text, q, mode, max_lines, out)
        return
    if kind == "utf-8-bom":  # read shows no BOM: line 1 starts after it
        n -= len(UTF8_BOM)
        buf[0:n] = buf[len(UTF8_BOM):n + len(UTF8_BOM)]
    out.binary = kind == "binary"
    want = "any" if out.binary else mode
    if q.multiline:
        if final:
            _multiline(buf, n, q, want, max_lines, out)
            return
        size = os.fstat(fd).st_size
        if size == 0:
            return
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            _multiline(data, len(data), q, want, max_lines, out)
        return
    line_base = 0
    while True:
        if final:
            end = n
        else:
            end = buf.rfind(b"\n", 0, n) + 1
            if end == 0:  # one line longer than the buffer: grow to hold it
                if len(buf) >= _MAX_LINE_BUFFER:
                    end = n
                else:
                    buf.extend(bytes(len(buf)))
                    n += os.readv(fd, [memoryview(buf)[n:]])
                    final = n < len(buf)
                    continue
        done = _line_chunk(buf, end, final, q, want, max_lines, line_base, out)
        if done or final:
            return
        if want == "lines":  # only listed lines need numbers; counting costs a pass
            line_base += buf.count(b"\n", 0, end)
        rest = n - end
        buf[0:rest] = buf[end:n]
        got = os.readv(fd, [memoryview(buf)[rest:]])
        n = rest + got
        final = n < len(buf)
        if n == 0:
            return


def _rest(fd: int, offset: int) -> bytes:
    """The file from ``offset`` on (by position: the cached first read leaves none behind)."""
    chunks: list[bytes] = []
    while True:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _search_text(data: bytearray, q: Query, mode: str, max_lines: int, out: FileOutcome) -> None:
    """Search a whole decoded file held in memory (a UTF-16 file, or one with a BOM)."""
    if q.multiline:
        _multiline(data, len(data), q, mode, max_lines, out)
    else:
        _line_chunk(data, len(data), True, q, mode, max_lines, 0, out)


def _match_spans(data: Any, end: int, final: bool, q: Query) -> Iterator[tuple[int, int]]:
    """(line start, line end) of each line with a match, in line mode, within data[:end]."""
    regex = q.regex
    pre = q.prefilter
    ahead = [-2] * len(pre) if pre is not None else []  # each literal's next hit (-2: not looked)
    pos = 0
    while pos <= end:
        if pre is not None:
            hit = -1
            for k, program in enumerate(pre):
                i = ahead[k]
                if i == -2 or 0 <= i < pos:  # a literal is looked for again only once passed
                    i = ahead[k] = program.Match(_UNANCHORED, data, pos, end)[0][0]
                if i >= 0 and (hit < 0 or i < hit):
                    hit = i
            if hit < 0:
                return
            ls = data.rfind(b"\n", pos, hit) + 1
            if ls == 0:
                ls = pos
            le = data.find(b"\n", hit, end)
            if le < 0:
                le = end
            span = regex.Match(_UNANCHORED, data, ls, le)[0]
            if span[0] < 0:
                pos = le + 1
                continue
            yield ls, le
            pos = le + 1
            continue
        s = regex.Match(_UNANCHORED, data, pos, end)[0][0]
        if s < 0:
            return
        if s == end and (not final or end == 0 or data[end - 1] == _NL):
            return  # an empty match after the last newline is not on any line
        ls = data.rfind(b"\n", 0, s) + 1
        le = data.find(b"\n", s, end)
        if le < 0:
            le = end
        yield ls, le
        pos = le + 1


def _line_chunk(data: bytearray, end: int, final: bool, q: Query, mode: str, max_lines: int,
                line_base: int, out: FileOutcome) -> bool:
    """Search complete lines data[:end]; True when the caller can stop reading."""
    if mode == "any":
        for _ in _match_spans(data, end, final, q):
            out.count = 1
            return True
        return False
    if mode == "count":
        for _ in _match_spans(data, end, final, q):
            out.count += 1
        return False
    last_pos, last_line = 0, line_base + 1
    for ls, le in _match_spans(data, end, final, q):
        last_line += data.count(b"\n", last_pos, ls)
        last_pos = ls
        out.count += 1
        out.lines.append(MatchLine(last_line, bytes(data[ls:le])))
        if len(out.lines) >= max_lines:
            return True
    return False


def _multiline(data: Any, n: int, q: Query, mode: str, max_lines: int, out: FileOutcome) -> None:
    """Whole-file search: each line touched by a match counts once."""
    regex = q.regex
    if q.prefilter is not None and not any(p.Match(_UNANCHORED, data, 0, n)[0][0] >= 0
                                           for p in q.prefilter):
        return
    pos = 0
    covered_end = -1  # offset of the end of the last line already counted
    last_pos, last_line = 0, 1
    while pos <= n:
        s, e = regex.Match(_UNANCHORED, data, pos, n)[0]
        if s < 0:
            break
        if s == n and (n == 0 or data[n - 1] == _NL):
            break
        if mode == "any":
            out.count = 1
            return
        ls = data.rfind(b"\n", 0, s) + 1
        le = data.find(b"\n", max(s, e - 1), n)
        if le < 0:
            le = n
        if ls <= covered_end:  # shares a line with the previous match
            ls = covered_end + 1
        if ls <= le and not (ls == le and ls == n and n > 0 and data[n - 1] == _NL):
            first = ls
            while first <= le:
                nl = data.find(b"\n", first, le)
                stop = le if nl < 0 else nl
                out.count += 1
                if mode == "lines":
                    last_line += data.count(b"\n", last_pos, first)
                    last_pos = first
                    out.lines.append(MatchLine(last_line, bytes(data[first:stop])))
                    if len(out.lines) >= max_lines:
                        return
                first = stop + 1
                if nl < 0:
                    break
            covered_end = max(covered_end, le)
        if e > s:
            pos = e
        else:
            nxt = data.find(b"\n", s, n)
            if nxt < 0:
                break
            pos = nxt + 1
