"""Child processes and signals: clean environments, process groups, SIGTERM as an unwind.

Children run in their own session (``start_new_session``) so a timeout or an
interrupt kills the whole group, never leaving a pip or a model server
behind.  Their environment is rebuilt rather than inherited wholesale: a
PyInstaller one-file binary points ``LD_LIBRARY_PATH`` at its own unpacked
libraries (which would break the host's Python), and ``PIP_*``,
``PYTHONPATH`` and proxy variables must not steer an offline install.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import foundation
from foundation import terminate_group

from ._errors import Interrupted

__all__ = ["OFFLINE_ENV", "Completed", "child_env", "handle_signals", "run", "signals_blocked"]

# The model server and the agent must not try to reach a hub or phone home
# (foundation's OFFLINE_ENV, which vLLM gets too), nor write bytecode into the
# root-owned release or read a user's site-packages.
OFFLINE_ENV: dict[str, str] = {
    **foundation.OFFLINE_ENV,
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
}
_DROP_PREFIXES = ("PIP_", "PYTHON", "VIRTUAL_ENV", "CONDA_")
_DROP = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy",
         "no_proxy", "NO_PROXY", "_MEIPASS2", "LD_PRELOAD"}


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: the operator's, minus what would steer it, plus offline."""
    env = {k: v for k, v in os.environ.items()
           if k not in _DROP and not k.startswith(_DROP_PREFIXES)}
    if getattr(sys, "frozen", False):
        # PyInstaller saved the caller's value here before pointing it at _MEIxxxx.
        orig = os.environ.get("LD_LIBRARY_PATH_ORIG")
        env.pop("LD_LIBRARY_PATH_ORIG", None)
        if orig is not None:
            env["LD_LIBRARY_PATH"] = orig
        else:
            env.pop("LD_LIBRARY_PATH", None)
    env.update(OFFLINE_ENV)
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Completed:
    returncode: int
    output: str
    timed_out: bool


def run(argv: Sequence[str], *, log: Path, env: Mapping[str, str], timeout_s: float,
        cwd: Path | None = None) -> Completed:
    """Run ``argv`` to completion with its output appended to ``log``; kill its group on
    timeout or interrupt.  ``output`` is the log's last 4 KiB (for error messages)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT, env=dict(env), cwd=cwd,
                                start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        terminate_group(proc)
    except BaseException:
        terminate_group(proc)
        raise
    return Completed(returncode=proc.returncode if proc.returncode is not None else -9,
                     output=tail(log), timed_out=timed_out)


def tail(path: Path, max_bytes: int = 4096) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def handle_signals() -> None:
    """SIGINT and SIGTERM unwind the stack (so every transaction restores), never kill."""
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_interrupted)
    with contextlib.suppress(AttributeError, ValueError):
        signal.signal(signal.SIGHUP, _raise_terminated)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP while a restore runs, so a second Ctrl-C cannot cut it."""
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
