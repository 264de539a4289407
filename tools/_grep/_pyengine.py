"""The pure-Python engine: RE2 (google-re2) over file buffers.

It runs wherever Abhed runs, with no binary beyond the wheels already in the
bundle.  Work is split two ways:

* ``workers > 1`` spreads batches of files over a process pool (google-re2
  holds the GIL while matching, so threads would not run RE2 in parallel).
  The pool is created on first use and kept for the life of the process.
* ``readahead`` starts a thread that opens the next files ahead of the
  search and asks the kernel to read them (``posix_fadvise(WILLNEED)``), so on
  a cold cache the disk works while RE2 runs: the "second reader".  It hands
  the open descriptors over in chunks, so a file is opened once and the
  threads meet once per chunk, not once per file: on a warm cache the earlier
  open-twice, signal-per-file reader cost more CPU than the search of a
  small literal (issue 16).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from tools._grep._engine import MatchLine, ScanResult
from tools._grep._query import Query, compile_query
from tools._grep._scan import (
    CHUNK,
    FileOutcome,
    nowait_supported,
    open_file,
    search_cached,
    search_fd,
    search_file,
)

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["PythonEngine"]

_BATCH_FILES = 256
_AHEAD_CHUNK = 32  # files opened per hand-over
_AHEAD_CHUNKS = 2  # chunks open ahead of the search (at most 64 + 32 descriptors)
_pool: Executor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


class PythonEngine:
    name = "python"

    def __init__(self, workers: int = 1, *, readahead: bool = False) -> None:
        self.workers = max(1, workers)
        self.readahead = readahead

    def scan(self, files: Sequence[str], query: Query, *, count: bool) -> ScanResult:
        mode = "count" if count else "any"
        if self.workers == 1 or len(files) < 2 * _BATCH_FILES:
            return _scan_batch(files, query, mode, self.readahead)
        pool = _get_pool(self.workers)
        key = (query.pattern, query.multiline, query.case_insensitive)
        futures = [
            pool.submit(_scan_remote, list(files[i : i + _BATCH_FILES]), key, mode, self.readahead)
            for i in range(0, len(files), _BATCH_FILES)
        ]
        total = ScanResult()
        for fut in futures:
            part = fut.result()
            total.counts.update(part.counts)
            total.binary.extend(part.binary)
            total.unreadable.extend(part.unreadable)
        return total

    def lines(self, files: Sequence[str], query: Query, *, max_lines: int) -> dict[str, list[MatchLine]]:
        buf = bytearray(CHUNK)
        found: dict[str, list[MatchLine]] = {}
        for path in files:
            outcome = search_file(path, query, "lines", buf, max_lines)
            if outcome.lines and not outcome.binary:
                found[path] = outcome.lines
        return found


def _scan_batch(files: Sequence[str], query: Query, mode: str, readahead: bool) -> ScanResult:
    result = ScanResult()
    buf = bytearray(CHUNK)
    if readahead and len(files) > 1 and nowait_supported():
        # Warm cache first: no read-ahead thread while every file is already cached
        # (on the kernel tree the thread cost 28% of the CPU of a warm search); the
        # first file that is not switches it on for the rest.
        for i, path in enumerate(files):
            outcome = search_cached(path, query, mode, buf)
            if outcome is None:
                files = files[i:]
                break
            _record(result, path, outcome)
        else:
            return result
    ahead = _Readahead(files) if readahead and len(files) > 1 else None
    try:
        outcomes: Iterator[tuple[str, FileOutcome]]
        if ahead is not None:
            outcomes = ahead.search(query, mode, buf)
        else:
            outcomes = ((path, search_file(path, query, mode, buf)) for path in files)
        for path, outcome in outcomes:
            _record(result, path, outcome)
    finally:
        if ahead is not None:
            ahead.stop()
    return result


def _record(result: ScanResult, path: str, outcome: FileOutcome) -> None:
    if outcome.error:
        result.unreadable.append(path)
    elif outcome.count:
        if outcome.binary:
            result.binary.append(path)
        else:
            result.counts[path] = outcome.count


@lru_cache(maxsize=8)
def _compiled(key: tuple[str, bool, bool]) -> Query:
    return compile_query(key[0], multiline=key[1], case_insensitive=key[2])


def _scan_remote(files: list[str], key: tuple[str, bool, bool], mode: str, readahead: bool) -> ScanResult:
    return _scan_batch(files, _compiled(key), mode, readahead)


def _get_pool(workers: int) -> Executor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size != workers:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            # forkserver: workers are forked from a clean server process, never
            # from this (possibly multi-threaded) one.
            ctx = multiprocessing.get_context("forkserver")
            _pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            _pool_size = workers
        return _pool


class _Readahead:
    """Opens files a few chunks ahead of the search, in a thread, and hands over the descriptors."""

    def __init__(self, files: Sequence[str]) -> None:
        self._files = files
        self._slots = threading.Semaphore(_AHEAD_CHUNKS)
        self._chunks: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
        self._stopped = False
        self._current: list[int] = []  # the chunk being searched; -1 where already handed on
        self._thread = threading.Thread(target=self._run, name="grep-readahead", daemon=True)
        self._thread.start()

    def search(self, query: Query, mode: str, buf: bytearray) -> Iterator[tuple[str, FileOutcome]]:
        """Each file's outcome, in order; a file that would not open is an error outcome."""
        files = self._files
        for start in range(0, len(files), _AHEAD_CHUNK):
            fds = self._current = self._chunks.get()
            self._slots.release()
            for i, fd in enumerate(fds):
                if fd < 0:
                    yield files[start + i], FileOutcome(error=True)
                else:
                    fds[i] = -1  # searched (and closed) from here on; stop() must not close it
                    yield files[start + i], search_fd(fd, query, mode, buf)

    def stop(self) -> None:
        self._stopped = True
        self._slots.release()
        self._thread.join()
        for fd in self._current:  # the search stopped mid-chunk (an error, a MemoryError)
            if fd >= 0:
                os.close(fd)
        self._current = []
        while True:  # descriptors opened for chunks the search never reached
            try:
                fds = self._chunks.get_nowait()
            except queue.Empty:
                return
            for fd in fds:
                if fd >= 0:
                    os.close(fd)

    def _run(self) -> None:
        advise = getattr(os, "posix_fadvise", None)
        files = self._files
        for start in range(0, len(files), _AHEAD_CHUNK):
            self._slots.acquire()
            if self._stopped:
                return
            fds: list[int] = []
            for path in files[start : start + _AHEAD_CHUNK]:
                try:
                    fd = open_file(path)
                except OSError:
                    fds.append(-1)
                    continue
                fds.append(fd)
                if advise is not None:
                    try:
                        advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
                    except OSError:
                        pass
            self._chunks.put(fds)
