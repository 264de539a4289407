"""Abhed's command runner, and the guest agent that serves it inside the microVM.

This one file is both:

* a library the host-side backends (``bwrap``, ``host``) import to run
  commands with the same lifecycle rules as the microVM, and
* the guest agent: copied into the microVM image as ``/opt/abhed/agent.py`` and
  started by the image's init as PID 1 (``python3 agent.py serve PORT``).

It therefore uses the Python standard library only, and nothing from Abhed.

Process lifecycle (every command, foreground or background):

* ``/bin/bash --noprofile --norc -c SCRIPT`` in a new session
  (``start_new_session``), stdin from ``/dev/null``, stdout and stderr combined
  into one pipe so their interleaving is kept;
* on timeout or kill: ``SIGTERM`` to the whole process group, then ``SIGKILL``
  after ``grace_s``; when a foreground shell exits, whatever it left running
  in its group is killed too (servers belong in background jobs);
* output is kept as head + tail (``keep_bytes`` each) with the total counted;
  with a ``spill_dir`` (host-side backends) all of it also goes to a private
  file there, named in the result as ``spill_path`` when the middle was cut,
  so the caller can keep the whole output instead of asking for a re-run;
  past ``max_output_bytes`` the command is killed and the result says
  ``output_limited`` (an overflow, not a failure of the command);
* the working directory the shell ends in is reported on a private pipe
  (an ``EXIT`` trap writes ``pwd -P`` to it), so the caller can carry the cwd
  to the next call while shell state (variables, functions) does not carry;
  a shell killed while it waits for a command (an interrupt, a timeout)
  reports none (``cwd`` null), and its output is only the command's;
* every command and job names its ``owner`` (the agent that ran it: a
  session's parent agent or one of its subagents), so an interrupt or a
  deadline stops only that agent's commands, and ``release`` ends only that
  agent's background jobs, while all of them share one machine.

Wire protocol (guest agent; one JSON object per line, UTF-8, both ways, over a
virtio-serial port; requests carry an integer ``id`` the reply repeats)::

    -> {"id": 1, "op": "hello"}
    <- {"id": 1, "ok": true, "result": {"agent": "abhed-guest-agent", "protocol": 2,
                                         "kernel": "6.1.0-...", "pid": 1,
                                         "features": ["stream"]}}
    -> {"id": 2, "op": "run", "command": "make test", "cwd": "/ws", "env": {...},
        "timeout_s": 120, "owner": "s-...", "stream": true}
    <- {"id": 2, "output_b64": "...", "skipped": 0}   (with "stream": at most every 0.1 s,
                                                        what came since; no "ok": not the reply)
    <- {"id": 2, "ok": true, "result": RUN}
    -> {"id": 3, "op": "start", "command": "...", "cwd": "/ws", "env": {...}, "owner": "s-..."}
    <- {"id": 3, "ok": true, "result": {"job_id": "job-1", "pid": 42}}
    -> {"id": 4, "op": "job", "job_id": "job-1", "offset": 0, "kill": false}
    <- {"id": 4, "ok": true, "result": JOB}
    -> {"id": 5, "op": "interrupt", "owner": "s-..."}   (no owner: every command)
    <- {"id": 5, "ok": true, "result": {"stopped": 1}}
    -> {"id": 6, "op": "release", "owner": "s-..."}      (that owner's jobs are killed)
    <- {"id": 6, "ok": true, "result": {"killed": 0}}
    -> {"id": 7, "op": "shutdown"}
    <- {"id": 7, "ok": true, "result": {}}          (then the VM powers off)

    RUN = {"exit_code": int|null, "signal": int|null, "timed_out": bool,
           "output_limited": bool, "head_b64": str, "tail_b64": str,
           "output_bytes": int, "duration_ms": float, "cwd": str|null}
    JOB = {"job_id", "state": "running"|"exited"|"killed", "exit_code", "signal",
           "data_b64": output from "offset" on, "offset": start of data,
           "next_offset": int, "dropped_bytes": int}

A failed request answers ``{"id": n, "ok": false, "error": "what to do"}``.
Requests are served concurrently (one thread each), replies may come out of
order; the ``id`` pairs them.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PROTOCOL_VERSION", "Runner", "Server", "serve"]

#: 2: commands and jobs name their owner (one shell per agent); ``release``.
#: What this agent offers beyond its protocol version, said in ``hello``: "stream" (a run
#: asked with ``"stream": true`` sends its output as it comes, as interim lines), "grace"
#: (``hello`` takes ``grace_s``, the host's SIGTERM-to-SIGKILL wait, for every command).
FEATURES = ("stream", "grace")
PROTOCOL_VERSION = 2
AGENT_NAME = "abhed-guest-agent"

Wrap = Callable[[list[str], str], list[str]]


def _shell_script(command: str, cwd_fd: int | None) -> str:
    if cwd_fd is None:
        return f'builtin cd -- "$1" || exit 127\n{command}\n'
    # The brace group runs in this shell (so `cd` inside it counts) with the
    # cwd pipe's number pointed at /dev/null, read-only: no child inherits the
    # pipe (nor holds it open, nor writes a directory into it).  The EXIT trap
    # normally runs once the group's redirection is undone, where the pipe is
    # back.  A shell killed by a signal while it waits for a child (an
    # interrupt, a timeout) runs the trap inside the group instead.  The
    # number must stay open there: closed (`N>&-`), bash reused it for the
    # stderr it saves while running the trap's own `2>/dev/null`, so
    # `pwd >&N` wrote the directory into the command's output whenever N was
    # one of bash's first saved-descriptor slots, 10 or 11 (the TUI's pipe).
    # Inside the group it now reads /dev/null: the write fails, the directory
    # is not reported (``cwd`` None) and the output is the command's own.
    return (
        f"trap '{{ builtin pwd -P >&{cwd_fd}; }} 2>/dev/null' EXIT\n"
        'builtin cd -- "$1" || exit 127\n'
        "{\n"
        f"{command}\n"
        f"}} {cwd_fd}</dev/null\n"
    )


def _grace(value: object) -> float:
    """A SIGTERM-to-SIGKILL grace the host asked for: a number of seconds, 0 to 600."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 600:
        raise ValueError(f"grace_s must be a number of seconds from 0 to 600; got {value!r}")
    return float(value)


def _pump(fd: int, feed: Callable[[bytes], None]) -> None:
    """Hand everything read from ``fd`` to ``feed`` until end of file (or the pipe breaks)."""
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            feed(chunk)
    except OSError:
        pass


class _Capture:
    """Combined output of one process: head and tail kept, everything counted."""

    def __init__(self, keep_bytes: int, limit_bytes: int, on_limit: Callable[[], None],
                 spill: Any = None, on_output: Callable[[bytes], None] | None = None) -> None:
        self.spill = spill  # an open binary file that receives every byte, or None
        self.on_output = on_output  # told each chunk as it is read (a running command's card)
        self.keep = keep_bytes
        self.limit = limit_bytes
        self.on_limit = on_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.limited = False
        self.lock = threading.Lock()
        self.done = threading.Event()

    def feed(self, chunk: bytes) -> None:
        chunk_all = chunk
        with self.lock:
            if self.spill is not None and self.total <= self.limit:
                try:
                    self.spill.write(chunk)
                except OSError:
                    self.spill = None  # disk full: the head and tail still stand
            self.total += len(chunk)
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > self.keep:
                    del self.tail[: len(self.tail) - self.keep]
            over = self.total > self.limit and not self.limited
            if over:
                self.limited = True
        if self.on_output is not None and not self.limited:
            try:
                self.on_output(chunk_all)
            except Exception:
                self.on_output = None  # a listener that fails is dropped, the command runs on
        if over:
            self.on_limit()

    def pump(self, fd: int) -> None:
        try:
            _pump(fd, self.feed)
        finally:
            self.done.set()


class _Log:
    """A background job's output, readable by absolute offset; old bytes dropped past a cap."""

    def __init__(self, cap_bytes: int) -> None:
        self.cap = cap_bytes
        self.buf = bytearray()
        self.start = 0  # absolute offset of buf[0]
        self.lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.buf += chunk
            extra = len(self.buf) - self.cap
            if extra > 0:
                del self.buf[:extra]
                self.start += extra

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        """(data, offset data starts at, bytes dropped before it)."""
        with self.lock:
            begin = max(offset, self.start)
            dropped = begin - offset if offset < self.start else 0
            rel = begin - self.start
            data = bytes(self.buf[rel: rel + max_bytes])
            return data, begin, dropped


class _Job:
    def __init__(self, job_id: str, proc: subprocess.Popen[bytes], log: _Log,
                 owner: str = "") -> None:
        self.id = job_id
        self.owner = owner
        self.proc = proc
        self.log = log
        self.killed = False
        self.reader: threading.Thread | None = None


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait until ``proc`` exits (True) or ``timeout_s`` passes (False).

    ``Popen.wait(timeout)`` polls with sleeps that double up to 50 ms, so a
    30 ms command was seen up to ~20 ms late; a pidfd (Linux 5.3+) wakes
    this thread the moment the child exits.  Without one, Popen.wait it is.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout_s
        while not poller.poll(max(0, min(deadline - time.monotonic(), 3600.0)) * 1000):
            if time.monotonic() >= deadline:
                return False
    finally:
        os.close(pidfd)
    proc.wait()  # exited: this only reaps it
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(kw_only=True, eq=False)
class Runner:
    """Runs shell commands with the lifecycle rules in the module docstring.

    ``wrap(argv, cwd)`` turns the plain bash argv into the argv actually
    executed (the ``bwrap`` backend puts its sandbox in front); ``cwd`` is
    where the shell should start.
    """

    wrap: Wrap | None = None
    grace_s: float = 2.0
    keep_bytes: int = 64 * 1024
    max_output_bytes: int = 64 * 1024 * 1024
    job_log_bytes: int = 4 * 1024 * 1024
    bash: str = "/bin/bash"
    pass_fds: Sequence[int] = ()
    spill_dir: str | None = None
    _jobs: dict[str, _Job] = field(default_factory=dict, init=False)
    _next_job: int = field(default=1, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    # process group -> owner, of running commands
    _foreground: dict[int, str] = field(default_factory=dict, init=False)
    # process group -> its pending SIGKILLs (see _stop_group)
    _killers: dict[int, list[threading.Timer]] = field(default_factory=dict, init=False)

    # -- spawning ---------------------------------------------------------
    def _spawn(self, command: str, cwd: str, env: dict[str, str],
               cwd_fd: int | None) -> subprocess.Popen[bytes]:
        if "\x00" in command:
            raise ValueError("the command contains a NUL byte, which no shell can run; remove it")
        argv = [self.bash, "--noprofile", "--norc", "-c", _shell_script(command, cwd_fd), "bash",
                cwd]
        if self.wrap is not None:
            argv = self.wrap(argv, cwd)
        fds = tuple(self.pass_fds) + ((cwd_fd,) if cwd_fd is not None else ())
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, start_new_session=True, pass_fds=fds, close_fds=True,
        )

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM the group, SIGKILL it after the grace period."""
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(self.grace_s)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()

    # -- foreground -------------------------------------------------------
    def run(self, command: str, cwd: str, env: dict[str, str], timeout_s: float,
            owner: str = "", on_output: Callable[[bytes], None] | None = None) -> dict[str, Any]:
        """Run ``command`` to its end; ``on_output`` hears its output as it comes (from the
        reader thread), for a person watching; the result holds it as head and tail."""
        started = time.monotonic()
        cwd_r, cwd_w = os.pipe()
        try:
            # Spawned and registered under the lock, so an interrupt that comes once the
            # command may have run a step waits for its group to be known: registered
            # after the lock was let go, an Esc right after the start could find no group
            # and be lost (the command then ran to its end; seen once in 60 under load).
            with self._lock:
                proc = self._spawn(command, cwd, env, cwd_w)
                self._foreground[proc.pid] = owner
        except BaseException:
            os.close(cwd_r)
            raise
        finally:
            os.close(cwd_w)
        assert proc.stdout is not None
        pgid = proc.pid

        def on_limit() -> None:
            # Called from the reader thread: stop the group without waiting for
            # the main thread, SIGKILL after the grace period (not once its run ended).
            with self._lock:
                self._stop_group(pgid)

        spill = None
        if self.spill_dir is not None:
            try:
                spill = tempfile.NamedTemporaryFile(dir=self.spill_dir, prefix="out-", delete=False)
            except OSError:
                spill = None
        cap = _Capture(self.keep_bytes, self.max_output_bytes, on_limit, spill, on_output)
        reader = threading.Thread(target=cap.pump, args=(proc.stdout.fileno(),), daemon=True)
        reader.start()
        timed_out = not _wait_exit(proc, max(0.0, started + timeout_s - time.monotonic()))
        if timed_out:
            self._stop(proc)
        # Anything the shell left behind in its group goes with it, now: the SIGKILLs an
        # interrupt armed have nothing left to do.  One locked block, so no interrupt
        # signals or arms anything for this group after it (its id may be handed out again).
        with self._lock:
            _signal_group(proc.pid, signal.SIGKILL)
            self._foreground.pop(pgid, None)
            killers = self._killers.pop(pgid, [])
        for timer in killers:
            timer.cancel()
        if not cap.done.wait(2.0):
            # A descendant escaped the group and holds the pipe: stop reading.
            pass
        proc.stdout.close()
        with os.fdopen(cwd_r, "rb") as f:
            os.set_blocking(f.fileno(), False)
            try:
                raw = f.read() or b""
            except OSError:
                raw = b""
        cwd_after = raw.decode("utf-8", "surrogateescape").strip() or None
        rc = proc.returncode
        with cap.lock:
            head, tail, total = bytes(cap.head), bytes(cap.tail), cap.total
        spill_path = None
        if spill is not None:
            spill.close()
            if cap.spill is not None and total > len(head) + len(tail):
                spill_path = spill.name
            else:
                os.unlink(spill.name)
        return {
            "exit_code": rc if rc >= 0 else None,
            "signal": -rc if rc < 0 else None,
            "timed_out": timed_out,
            "output_limited": cap.limited,
            "head_b64": base64.b64encode(head).decode(),
            "tail_b64": base64.b64encode(tail).decode(),
            "output_bytes": total,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
            "cwd": cwd_after,
            **({"spill_path": spill_path} if spill_path else {}),
        }

    def interrupt(self, owner: str | None = None) -> int:
        """Stop the running foreground commands of ``owner`` (None: every one).

        SIGTERM to each command's process group now, SIGKILL after the grace
        period; the waiting ``run`` then returns with the signal, and the
        output so far.  Background jobs are left alone: they have their own
        handles.  Returns how many commands were signalled.
        """
        with self._lock:
            groups = [g for g, o in self._foreground.items() if owner is None or o == owner]
            for pgid in groups:
                self._stop_group(pgid)
        return len(groups)

    def _stop_group(self, pgid: int) -> None:
        """SIGTERM a running command's group now, SIGKILL after the grace period unless its
        run ends first (called with the lock held).  The run calls the SIGKILL off when it
        ends, under the same lock, so a group id the kernel hands out again within the
        grace (up to a minute, the operator's kill_grace_s) is never signalled by mistake."""
        if pgid not in self._foreground:
            return  # its run has ended: the group is gone
        _signal_group(pgid, signal.SIGTERM)
        timer = threading.Timer(self.grace_s, _signal_group, (pgid, signal.SIGKILL))
        timer.daemon = True
        self._killers.setdefault(pgid, []).append(timer)
        timer.start()

    # -- background -------------------------------------------------------
    def start(self, command: str, cwd: str, env: dict[str, str],
              owner: str = "") -> dict[str, Any]:
        proc = self._spawn(command, cwd, env, None)
        assert proc.stdout is not None
        log = _Log(self.job_log_bytes)
        with self._lock:
            job_id = f"job-{self._next_job}"
            self._next_job += 1
            job = _Job(job_id, proc, log, owner)
            self._jobs[job_id] = job
        fd = proc.stdout.fileno()

        job.reader = threading.Thread(target=_pump, args=(fd, log.feed), daemon=True)
        job.reader.start()
        return {"job_id": job_id, "pid": proc.pid}

    def job(self, job_id: str, offset: int = 0, kill: bool = False,
            max_bytes: int = 1 << 20) -> dict[str, Any]:
        job = self._jobs.get(job_id)
        if job is None:
            known = ", ".join(sorted(self._jobs)) or "none"
            raise KeyError(f"no background job {job_id!r} in this session (jobs: {known})")
        if kill and job.proc.poll() is None:
            job.killed = True
            self._stop(job.proc)
        if job.proc.poll() is not None:
            self._reap(job)
        data, begin, dropped = job.log.read(max(0, offset), max_bytes)
        rc = job.proc.poll()
        state = "running" if rc is None else ("killed" if job.killed else "exited")
        return {
            "job_id": job_id,
            "state": state,
            "exit_code": rc if rc is not None and rc >= 0 else None,
            "signal": -rc if rc is not None and rc < 0 else None,
            "data_b64": base64.b64encode(data).decode(),
            "offset": begin,
            "next_offset": begin + len(data),
            "dropped_bytes": dropped,
        }

    @staticmethod
    def _reap(job: _Job) -> None:
        """After a job's shell ended: kill its group's leftovers, drain, close the pipe."""
        _signal_group(job.proc.pid, signal.SIGKILL)
        if job.reader is not None:
            job.reader.join(1.0)
            if not job.reader.is_alive() and job.proc.stdout is not None:
                job.proc.stdout.close()

    def jobs(self) -> list[str]:
        return sorted(self._jobs)

    def release(self, owner: str) -> int:
        """Kill ``owner``'s background jobs (that agent ended); returns how many were running."""
        return self._kill([j for j in list(self._jobs.values()) if j.owner == owner])

    def close(self) -> None:
        """Kill every background job (jobs die with the session)."""
        self._kill(list(self._jobs.values()))

    def _kill(self, jobs: list[_Job]) -> int:
        running = 0
        for job in jobs:
            if job.proc.poll() is None:
                running += 1
                job.killed = True
                self._stop(job.proc)
            self._reap(job)
        return running


# -- the guest agent ------------------------------------------------------

def _find_port(name: str) -> str:
    """The /dev node of the virtio-serial port called ``name`` (no udev in the guest)."""
    link = f"/dev/virtio-ports/{name}"
    if os.path.exists(link):
        return link
    base = "/sys/class/virtio-ports"
    for _ in range(200):
        if os.path.isdir(base):
            for entry in os.listdir(base):
                try:
                    with open(f"{base}/{entry}/name", encoding="utf-8") as f:
                        if f.read().strip() == name:
                            return f"/dev/{entry}"
                except OSError:
                    continue
        time.sleep(0.05)
    raise SystemExit(f"abhed agent: no virtio-serial port named {name}")


class _Stream:
    """A running command's output on its way to the host: at most every ``every_s`` one
    interim line ``{"id": ID, "output_b64": ...}`` holding what came since (the newest
    ``keep_bytes`` of it; ``skipped`` counts what was left out), flushed at the end."""

    def __init__(self, send: Callable[[dict[str, Any]], None], rid: Any, *,
                 every_s: float = 0.1, keep_bytes: int = 16 * 1024) -> None:
        self.send = send
        self.rid = rid
        self.every_s = every_s
        self.keep = keep_bytes
        self.buf = bytearray()
        self.skipped = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.buf += chunk
            if len(self.buf) > self.keep:
                self.skipped += len(self.buf) - self.keep
                del self.buf[: len(self.buf) - self.keep]

    def _flush(self) -> None:
        with self.lock:
            data, skipped = bytes(self.buf), self.skipped
            self.buf.clear()
            self.skipped = 0
        if data or skipped:
            try:
                self.send({"id": self.rid, "output_b64": base64.b64encode(data).decode(),
                           "skipped": skipped})
            except OSError:
                self.stopped.set()  # the host is gone: nobody to tell

    def _loop(self) -> None:
        while not self.stopped.wait(self.every_s):
            self._flush()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(1.0)
        self._flush()


class Server:
    """Serves the wire protocol on one file descriptor (the virtio-serial port)."""

    def __init__(self, fd: int, runner: Runner | None = None) -> None:
        self.fd = fd
        self.wlock = threading.Lock()
        self.runner = runner or Runner()
        self.eof_exits = False  # tests: stop at end of input instead of waiting for a host
        self.pid1_child = -1  # the pid that may power the guest off on "shutdown"

    def send(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.wlock:
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]

    def handle(self, req: dict[str, Any]) -> None:
        rid = req.get("id")
        try:
            result = self.dispatch(req)
            self.send({"id": rid, "ok": True, "result": result})
        except Exception as exc:
            self.send({"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        if req.get("op") == "shutdown" and os.getpid() == self.pid1_child:
            _power_off()

    def dispatch(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "hello":
            if "grace_s" in req:  # the host's sandbox.kill_grace_s (feature "grace")
                self.runner.grace_s = _grace(req["grace_s"])
            return {"agent": AGENT_NAME, "protocol": PROTOCOL_VERSION, "kernel": os.uname().release,
                    "pid": os.getpid(), "features": list(FEATURES)}
        owner = str(req.get("owner") or "")
        if op == "run":
            stream = _Stream(self.send, req.get("id")) if req.get("stream") else None
            try:
                return self.runner.run(str(req["command"]), str(req["cwd"]), dict(req["env"]),
                                       float(req["timeout_s"]), owner,
                                       stream.feed if stream is not None else None)
            finally:
                if stream is not None:
                    stream.close()
        if op == "start":
            return self.runner.start(str(req["command"]), str(req["cwd"]), dict(req["env"]), owner)
        if op == "job":
            return self.runner.job(str(req["job_id"]), int(req.get("offset", 0)),
                                   bool(req.get("kill", False)))
        if op == "interrupt":
            return {"stopped": self.runner.interrupt(owner if "owner" in req else None)}
        if op == "release":
            return {"killed": self.runner.release(owner)}
        if op == "shutdown":
            self.runner.close()
            return {}
        raise ValueError(f"unknown op {op!r}; ops: hello, run, start, job, interrupt, release, "
                         "shutdown")

    def loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                if self.eof_exits:
                    return
                # Host side not connected (yet, or any more): poll again.
                time.sleep(0.05)
                continue
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict):
                        raise ValueError("request must be a JSON object")
                except ValueError as exc:
                    self.send({"id": None, "ok": False, "error": f"bad request line: {exc}"})
                    continue
                threading.Thread(target=self.handle, args=(req,), daemon=True).start()


def _power_off() -> None:
    os.sync()
    try:
        with open("/proc/sysrq-trigger", "w") as f:
            f.write("o")
    except OSError:
        os._exit(0)


def serve(port_name: str) -> None:
    """Run as the guest's PID 1: fork the agent, reap orphans, power off when it ends."""
    if os.getpid() == 1:
        child = os.fork()
        if child:
            while True:
                try:
                    pid, _ = os.wait()
                except ChildProcessError:
                    break
                if pid == child:
                    break
            _power_off()
            return
        os.setsid()
    server = Server(os.open(_find_port(port_name), os.O_RDWR))
    server.pid1_child = os.getpid()
    server.loop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        raise SystemExit("usage: agent.py serve PORT_NAME")
