"""The ripgrep engine: the same search, run by an ``rg`` binary.

How the runtime finds ``rg`` (first hit wins), unless the operator forces an
engine with ``grep_engine``:

1. ``rg`` beside the running interpreter (``<venv>/bin/rg``): where the
   ``ripgrep`` wheel in the bundle installs it, so the appliance uses the
   version it was tested with;
2. ``rg`` on ``PATH``.

A candidate counts only if ``rg --version`` runs and reports 13 or newer.

ripgrep is given the exact file list (ignore rules are ours, not its) and
flags that make it read files as Abhed does: no config file, bytes as they
are except that a byte-order mark is honoured (``--encoding auto``: a UTF-8
BOM is not part of line 1, a UTF-16 file is searched as its text, as ``read``
shows them), binary files searched as text (``--text``; the tool drops them
afterwards by the same rule the Python engine uses, :func:`sniff`).  The pattern is rewritten into ripgrep's dialect by
:mod:`tools._grep._syntax` so it keeps RE2's meaning.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from functools import lru_cache

from tools._grep._engine import BINARY_SNIFF_BYTES, MatchLine, ScanResult, sniff
from tools._grep._query import Query

__all__ = ["RipgrepEngine", "RipgrepFailed", "find_rg"]

_MIN_MAJOR = 13
_ARG_BYTES = 256 * 1024  # per command line, well under ARG_MAX
_ERROR_LINE = re.compile(rb"^rg: (.*): [^:]*\(os error \d+\)$")


class RipgrepFailed(Exception):
    """rg exited with an error we cannot attribute to one file (e.g. it refused the pattern)."""


def find_rg() -> str | None:
    """The rg binary to use, or None (see the module docstring for the order)."""
    beside = os.path.join(os.path.dirname(sys.executable), "rg")
    for candidate in (beside, shutil.which("rg")):
        if candidate and _usable(candidate):
            return candidate
    return None


@lru_cache(maxsize=8)
def _usable(path: str) -> bool:
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return False
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    m = re.match(rb"ripgrep (\d+)\.", out.stdout)
    return out.returncode == 0 and m is not None and int(m.group(1)) >= _MIN_MAJOR


class RipgrepEngine:
    name = "ripgrep"

    def __init__(self, rg: str, root: str, threads: int = 1) -> None:
        self.rg = rg
        self.root = root.rstrip("/") or "/"
        self.threads = max(1, threads)

    # -- the Engine interface ---------------------------------------------------
    def scan(self, files: Sequence[str], query: Query, *, count: bool) -> ScanResult:
        result = ScanResult()
        if count and query.multiline:
            # rg --count counts matches, not lines, in multiline mode; its JSON
            # summary per file has the matched-line count we use everywhere.
            for path, stats in self._json(files, query, extra=["--max-count", str(2**31 - 1)],
                                          want_lines=False, result=result):
                assert isinstance(stats, int)
                result.counts[path] = stats
        elif count:
            for path, value in self._run(files, query, ["--count"], result):
                result.counts[path] = int(value)
        else:
            for path, _ in self._run(files, query, ["--files-with-matches"], result):
                result.counts[path] = 1
        for path in [p for p in result.counts if _is_binary(p)]:
            del result.counts[path]
            result.binary.append(path)
        return result

    def lines(self, files: Sequence[str], query: Query, *, max_lines: int) -> dict[str, list[MatchLine]]:
        found: dict[str, list[MatchLine]] = {}
        result = ScanResult()
        for path, lines in self._json(files, query, extra=["--max-count", str(max_lines)],
                                      want_lines=True, result=result):
            assert isinstance(lines, list)
            found.setdefault(path, []).extend(lines)
        for path in list(found):
            if _is_binary(path):
                del found[path]
            else:
                found[path] = found[path][:max_lines]
        return found

    # -- running rg ----------------------------------------------------------------
    def _base(self, query: Query) -> list[str]:
        args = [
            self.rg, "--no-config", "--no-ignore", "--hidden", "--text", "--encoding", "auto",
            "--color", "never", "--with-filename", "--threads", str(self.threads),
        ]
        if query.multiline:
            args.append("--multiline")
        return args + ["--regexp", query.rust_pattern]

    def _batches(self, files: Sequence[str]) -> Iterator[list[str]]:
        prefix = self.root + "/" if self.root != "/" else "/"
        batch: list[str] = []
        size = 0
        for path in files:
            rel = path[len(prefix):] if path.startswith(prefix) else path
            batch.append(rel)
            size += len(rel.encode("utf-8", "surrogateescape")) + 1
            if size >= _ARG_BYTES:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def _abs(self, raw: bytes) -> str:
        path = raw.decode("utf-8", "surrogateescape")
        return path if path.startswith("/") else os.path.join(self.root, path)

    def _spawn(self, args: list[str], batch: list[str],
               result: ScanResult) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            args + ["--", *batch], cwd=self.root, capture_output=True, check=False,
            env=_clean_env(), stdin=subprocess.DEVNULL,
        )
        if proc.returncode not in (0, 1):
            # Per-file read errors (a file deleted or made unreadable since the
            # walk) are skipped as the Python engine skips them; anything else
            # (a refused pattern, a crash) is fatal.
            fatal: list[bytes] = []
            for line in proc.stderr.splitlines():
                m = _ERROR_LINE.match(line)
                if m is not None:
                    result.unreadable.append(self._abs(m.group(1)))
                elif line.strip():
                    fatal.append(line)
            if fatal or proc.returncode != 2:
                raise RipgrepFailed(b"\n".join(fatal).decode("utf-8", "replace").strip()[:500]
                                    or f"rg exited with status {proc.returncode}")
        return proc

    def _run(self, files: Sequence[str], query: Query, mode: list[str],
             result: ScanResult) -> Iterator[tuple[str, str]]:
        args = self._base(query) + mode + ["--null"]
        for batch in self._batches(files):
            proc = self._spawn(args, batch, result)
            out = proc.stdout
            if mode == ["--files-with-matches"]:
                for raw in out.split(b"\0"):
                    if raw:
                        yield self._abs(raw), "1"
            else:
                for line in out.split(b"\n"):
                    if line:
                        raw, _, value = line.rpartition(b"\0")
                        yield self._abs(raw), value.decode()

    def _json(self, files: Sequence[str], query: Query, *, extra: list[str], want_lines: bool,
              result: ScanResult) -> Iterator[tuple[str, list[MatchLine] | int]]:
        args = self._base(query) + ["--json"] + extra
        for batch in self._batches(files):
            proc = self._spawn(args, batch, result)
            for line in proc.stdout.split(b"\n"):
                if not line:
                    continue
                event = json.loads(line)
                kind = event.get("type")
                data = event.get("data", {})
                if kind == "match" and want_lines:
                    text = _text(data["lines"])
                    if text.endswith(b"\n"):
                        text = text[:-1]
                    number = int(data["line_number"])
                    parts = text.split(b"\n")
                    yield self._abs(_text(data["path"])), [
                        MatchLine(number + i, part) for i, part in enumerate(parts)
                    ]
                elif kind == "end" and not want_lines:
                    matched = int(data["stats"]["matched_lines"])
                    if matched:
                        yield self._abs(_text(data["path"])), matched


def _text(obj: dict[str, str]) -> bytes:
    if "text" in obj:
        return obj["text"].encode("utf-8", "surrogateescape")
    return base64.b64decode(obj["bytes"])


def _is_binary(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return sniff(os.read(fd, BINARY_SNIFF_BYTES)) == "binary"
    except OSError:
        return False
    finally:
        os.close(fd)


def _clean_env() -> dict[str, str]:
    # RIPGREP_CONFIG_PATH and friends must not change the meaning of a search.
    return {k: v for k, v in os.environ.items() if not k.startswith("RIPGREP")}
