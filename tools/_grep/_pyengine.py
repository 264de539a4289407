"""The pure-Python engine: RE2 (google-re2) over file buffers.

It runs wherever Abhed runs, with no binary beyond the wheels already in the
bundle.  Work is split two ways:

* ``workers > 1`` spreads batches of files over a process pool (google-re2
  holds the GIL while matching, so threads would not run RE2 in parallel).
  The pool is created on first use and kept for the life of the process.
* ``readahead`` starts a thread that asks the kernel to read the next files
  ahead of the search (``posix_fadvise(WILLNEED)``), so on a cold cache the
  disk works while RE2 runs: the "second reader".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from functools import lru_cache

from tools._grep._engine import MatchLine, ScanResult
from tools._grep._query import Query, compile_query
from tools._grep._scan import CHUNK, search_file

__all__ = ["PythonEngine"]

_BATCH_FILES = 256
_READAHEAD_FILES = 64
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
    ahead = _Readahead(files) if readahead and len(files) > 1 else None
    try:
        for path in files:
            outcome = search_file(path, query, mode, buf)
            if ahead is not None:
                ahead.done_one()
            if outcome.error:
                result.unreadable.append(path)
            elif outcome.count:
                if outcome.binary:
                    result.binary.append(path)
                else:
                    result.counts[path] = outcome.count
    finally:
        if ahead is not None:
            ahead.stop()
    return result


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

            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            # forkserver: workers are forked from a clean server process, never
            # from this (possibly multi-threaded) one.
            ctx = multiprocessing.get_context("forkserver")
            _pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            _pool_size = workers
        return _pool


class _Readahead:
    """Keeps the kernel reading up to a fixed number of files ahead of the search."""

    def __init__(self, files: Sequence[str]) -> None:
        self._files = files
        self._slots = threading.Semaphore(_READAHEAD_FILES)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="grep-readahead", daemon=True)
        self._thread.start()

    def done_one(self) -> None:
        self._slots.release()

    def stop(self) -> None:
        self._stopped = True
        self._slots.release()
        self._thread.join()

    def _run(self) -> None:
        advise = getattr(os, "posix_fadvise", None)
        for path in self._files:
            self._slots.acquire()
            if self._stopped:
                return
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if advise is not None:
                    advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)
