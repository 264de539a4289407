"""Where everything lives under the prefix, the prefix lock, and the state file.

    PREFIX/
      current -> releases/7         the live release (a relative symlink, switched atomically)
      releases/<version>/           one release: bundle/ (the verified members), venv/,
                                    release.json, record.json, run-model-server, .complete
      store/sha256/<hex>            model files by content hash, hard-linked into releases,
                                    so unchanged weights are kept once
      state/installed.json          versions, current, previous, highest ever installed
      state/trust.json              the pinned publisher keys and threshold
      audit/audit.log, audit/head   the hash-chained audit log and its head witness
      logs/                         pip and model-server logs of each step
      data/                         ABHED_HOME of the installed agent (kept by --keep-data)
      bin/abhed -> ../current/venv/bin/abhed

The site layer inside each release and the host's links to it are described in
``installer._site_install``.

A release directory without ``.complete`` is a staging that never finished
(a crash or power loss): the next command that takes the lock removes it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation import DocumentError, FileMissing, FoundationError, read_document, under

from ._errors import Busy, InstallerError, StepFailed, UsageError

__all__ = ["DEFAULT_PREFIX", "Layout", "State", "atomic_write", "lock_prefix"]

DEFAULT_PREFIX = Path("/opt/abhed")
STATE_FORMAT = "abhed-installer-state/1"


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` by temp file, fsync and rename (never a torn file)."""
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Layout:
    """The installer's places beneath ``prefix`` (this module's docstring draws them)."""

    prefix: Path

    current = under("current", root="prefix")
    releases = under("releases", root="prefix")
    store = under("store", "sha256", root="prefix")
    state_dir = under("state", root="prefix")
    audit_dir = under("audit", root="prefix")
    logs = under("logs", root="prefix")
    data = under("data", root="prefix")
    bin = under("bin", root="prefix")

    def release(self, version: int) -> Path:
        return self.releases / str(version)

    def current_version(self) -> int | None:
        """The version ``current`` points at, read from the symlink itself."""
        try:
            target = os.readlink(self.current)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise StepFailed(f"{self.current} is not a symbolic link; it was replaced by "
                                 "hand: move it away and run `rollback` or `install` again") from None
            raise
        name = Path(target).name
        return int(name) if name.isdigit() else None

    def installed_versions(self) -> list[int]:
        """Complete releases on disk, oldest first."""
        try:
            names = os.listdir(self.releases)
        except FileNotFoundError:
            return []
        return sorted(int(n) for n in names
                      if n.isdigit() and (self.releases / n / ".complete").is_file())


#: The most a record the installer keeps (its state, the CA's index, the engineers) may hold.
MAX_KEPT_BYTES = 16 << 20


def read_kept(path: Path, fmt: str, *, what: str, hint: str,
              error: type[InstallerError] = StepFailed) -> dict[str, Any] | None:
    """A JSON record the installer keeps under its prefix, tagged ``"format": fmt``, read by
    foundation's one reader (a duplicate key, a cut file, one over :data:`MAX_KEPT_BYTES`
    refused, each in its words, then ``hint``); None when there is none yet.

    Raises:
        error: it is there but unreadable, malformed, or of another format.
    """
    try:
        raw = read_document(path, what=what, cap=MAX_KEPT_BYTES, syntax="json", hint=hint)
    except FileMissing:
        return None
    except DocumentError as exc:  # its message ends with the hint
        raise error(str(exc)) from None
    except FoundationError as exc:
        raise error(f"{exc}. {hint}") from None
    if raw.get("format") != fmt:
        raise error(f"{what} {path}: not an {fmt} file. {hint}")
    return raw


@dataclass
class State:
    """``state/installed.json``: what the installer believes, beside the symlink's truth."""

    name: str | None = None
    current: int | None = None
    previous: int | None = None
    highest: int | None = None
    host_link: str | None = None  # /etc/abhed/site, or --host-link (installer._site_install)
    bin_link: str | None = None  # /usr/local/bin/abhed, or --bin-link
    role: str | None = None  # agent, model or all (installer._roles); None: all, from before roles

    @classmethod
    def load(cls, layout: Layout) -> State:
        raw = read_kept(layout.state_dir / "installed.json", STATE_FORMAT, what="installer state",
                        hint="Restore it from a backup, or run `check` and `audit verify` to "
                             "see what happened.")
        if raw is None:
            return cls()
        return cls(name=raw.get("name"), current=raw.get("current"),
                   previous=raw.get("previous"), highest=raw.get("highest"),
                   host_link=raw.get("host_link"), bin_link=raw.get("bin_link"),
                   role=raw.get("role"))

    def copy(self) -> State:
        return State(self.name, self.current, self.previous, self.highest, self.host_link,
                     self.bin_link, self.role)

    def save(self, layout: Layout) -> None:
        layout.state_dir.mkdir(parents=True, exist_ok=True)
        body = {"format": STATE_FORMAT, "name": self.name, "current": self.current,
                "previous": self.previous, "highest": self.highest,
                "host_link": self.host_link, "bin_link": self.bin_link, "role": self.role}
        atomic_write(layout.state_dir / "installed.json",
                     (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())


@contextmanager
def lock_prefix(prefix: Path, *, create: bool) -> Iterator[None]:
    """Hold ``PREFIX/.lock`` exclusively; Busy if another installer has it."""
    if not prefix.exists():
        if not create:
            raise UsageError(f"{prefix} does not exist: nothing is installed there (pass "
                             "--prefix if you installed elsewhere)")
        prefix.mkdir(parents=True, mode=0o755)
    fd = os.open(prefix / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"another abhed-installer is working on {prefix} (it holds "
                       f"{prefix / '.lock'}); wait for it to finish and run this again") from None
        yield
    finally:
        os.close(fd)
