"""A model service started on demand for one user, and stopped when nothing uses it.

Like Ollama's server, which the first client starts and which unloads its model
after a quiet spell, ``abhed`` starts ``abhed serve`` for a provider marked
``start_on_demand`` when its socket does not answer, and that server stops by
itself once no ``abhed`` has used it for ``serve.idle_stop_s``.

Who may talk to it: vLLM listens on a Unix socket (``--uds``) inside a directory
of mode 0700 that the user owns, so another local user cannot even connect.  An
API key on a loopback port would not do: vLLM's ``--api-key`` guards only
``/v1``-style paths, and ``/invocations`` serves the same completions unguarded
(its own ``--help`` says so).

Who uses it, without a registry that could go stale: every ``abhed`` process
that works against the service holds a *shared* ``flock`` on ``NAME.users`` for
as long as its session is open (the kernel drops it when the process dies,
however it dies).  The keeper (the ``abhed serve --socket`` process) polls for an
*exclusive* lock: when it gets one, nobody holds the service; when it has got
one for ``idle_stop_s`` on end, it keeps that lock while it stops vLLM, so a
client arriving meanwhile waits and then starts a fresh service instead of
finding one that is going away.  The keeper holds ``NAME.keeper`` for its whole
life, which is how a second client knows a service is already starting.
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from models._errors import ServeError
from models._local_get import get_local

__all__ = ["LocalService", "ServiceHold"]

# sockaddr_un's sun_path is 108 bytes on Linux, its terminating NUL included.
_MAX_SOCKET_PATH = 107


class ServiceHold:
    """This process's use of a local service: a shared lock, released by :meth:`release`."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


class LocalService:
    """The paths and locks of one catalog model's on-demand service under ``run_dir``."""

    def __init__(self, run_dir: Path, name: str, log_path: Path) -> None:
        self.run_dir = run_dir
        self.name = name
        self.socket = run_dir / f"{name}.sock"
        self.users = run_dir / f"{name}.users"
        self.keeper_lock = run_dir / f"{name}.keeper"
        self.start_lock = run_dir / f"{name}.start"
        self.log_path = log_path

    # -- the directory that keeps other users out ---------------------------
    def prepare(self) -> None:
        """Make ``run_dir`` (0700, ours) or refuse to use one others could enter."""
        if len(os.fsencode(self.socket)) > _MAX_SOCKET_PATH:
            raise ServeError(f"the model service's socket path {self.socket} is longer than the "
                             f"{_MAX_SOCKET_PATH} bytes a Unix socket allows; use a shorter "
                             "ABHED_HOME", reason="socket_path")
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(self.run_dir, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise ServeError(
                f"{self.run_dir} must be a directory of yours with mode 0700 (it is "
                f"{stat.filemode(st.st_mode)}, owner uid {st.st_uid}): the model service's socket "
                f"lives there and would answer whoever can enter it. Fix: chmod 700 {self.run_dir}",
                reason="socket_dir")

    def _open(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)

    # -- client side --------------------------------------------------------
    def answers(self, timeout_s: float = 2.0) -> bool:
        """Whether a server answers ``/health`` on the socket now."""
        try:
            return get_local("http://localhost/health", timeout_s, unix_socket=self.socket)[0] == 200
        except OSError:
            return False

    def hold(self) -> ServiceHold:
        """Mark this process as a user (waits while a keeper is stopping the service)."""
        self.prepare()
        fd = self._open(self.users)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.utime(fd)  # the keeper counts a quiet spell from the last use it saw
        except BaseException:
            os.close(fd)
            raise
        return ServiceHold(fd)

    def keeper_running(self) -> bool:
        fd = self._open(self.keeper_lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def ensure(self, command: Sequence[str], *, timeout_s: float, env: dict[str, str] | None = None,
               say: Callable[[str], None] | None = None) -> bool:
        """Start ``command`` (the keeper) unless the service answers or is starting; wait.

        Returns True when this call started it.  Raises ServeError (with the
        log's last lines) when the keeper dies or ``timeout_s`` passes first.
        Call with a :meth:`hold` taken, so the service cannot stop meanwhile.
        """
        if self.answers():
            return False
        self.prepare()
        lock = self._open(self.start_lock)
        started: subprocess.Popen[bytes] | None = None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one client starts it; the others wait here
            if self.answers():
                return False
            if not self.keeper_running():
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                with self.log_path.open("ab") as log:
                    started = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=subprocess.STDOUT, env=env,
                                               start_new_session=True)
            if say is not None:
                say(f"{'starting' if started else 'waiting for'} the local model service for "
                    f"{self.name} (on demand; it stops after a quiet spell; log: {self.log_path})")
            self._wait(started, timeout_s)
            if started is not None:
                # The keeper outlives this call (and maybe this process): reap it if it ends first.
                threading.Thread(target=started.wait, name="abhed-keeper-reaper", daemon=True).start()
            return started is not None
        finally:
            os.close(lock)

    def _wait(self, keeper: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.answers():
            code = keeper.poll() if keeper is not None else None
            if code is not None or (keeper is None and not self.keeper_running()):
                raise ServeError(f"the local model service for {self.name} stopped before it "
                                 f"answered (exit {code}); last log lines: {self._tail()} "
                                 f"Full log: {self.log_path}", reason="server_exited")
            if time.monotonic() > deadline:
                raise ServeError(f"the local model service for {self.name} did not answer within "
                                 f"{timeout_s:g} s; it may still be loading. Log: {self.log_path}",
                                 reason="timeout")
            time.sleep(0.5)

    def _tail(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4000))
                lines = fh.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(line for line in lines[-3:] if line.strip()) or "(empty)"

    # -- keeper side --------------------------------------------------------
    def claim_keeper(self) -> int:
        """The keeper's lock, held for its life; ServeError when another keeper has it."""
        self.prepare()
        fd = self._open(self.keeper_lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ServeError(f"a model service for {self.name} is already running on {self.socket}",
                             reason="port_taken") from None
        self.socket.unlink(missing_ok=True)  # a dead keeper's socket: vLLM's bind would fail on it
        os.close(self._open(self.users))
        os.utime(self.users)  # the first quiet spell counts from the start
        return fd

    def idle(self, idle_s: float) -> int | None:
        """When nobody has held the service for ``idle_s``: the users lock, held exclusively
        (keep it while stopping, then close it); else None.  Call about once a second."""
        fd = self._open(self.users)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.utime(fd)  # in use now: the quiet spell starts no earlier than this
            os.close(fd)
            return None
        if time.time() - os.fstat(fd).st_mtime >= idle_s:
            return fd
        os.close(fd)
        return None
