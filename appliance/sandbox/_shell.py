"""One shell per agent in the session's sandbox: a working directory, jobs and commands of its own.

A session's agents (the parent and each subagent) share one sandbox: the
same machine, the same workspace, the same ``/tmp``.  What a person would
call "my shell" is each agent's own, so one cannot move or stop another:

* the **working directory**: a subagent's ``cd childdir`` moves neither its
  parent's next ``pwd`` nor a sibling's (each agent's shell starts in the
  workspace root and carries its own ``cd`` from call to call);
* its **running commands**: an interrupt, a cancelled parent or a deadline
  stops this agent's commands (their output so far is kept), never a
  sibling's;
* its **background jobs**: a job id belongs to the agent that started it (a
  sibling's id is "unknown"), and the jobs end when that agent's shell is
  released, or with the session.

The environment is the same for every agent and fresh for every command:
environment variables never carry from one call to the next (docs/tools.md).

:class:`AgentShell` implements :class:`tools.ShellSandbox` over a
:class:`SessionSandbox` backend (microVM, bubblewrap, host), naming its
owner on every command so the backend can tell the agents apart.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Protocol, cast

from tools import NOT_STARTED, JobOutput, ShellRun, ShellSandbox, ToolFailure

__all__ = ["AgentShell", "SessionSandbox", "shell_for"]

CHASE_EVERY_S = 0.05
"""The first wait before an interrupt is sent again to a run that has not returned (then
doubling, up to a second)."""


class SessionSandbox(Protocol):
    """A sandbox backend that several agents' shells share; each call names its owner."""

    backend: str
    workspace: str

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout_s: float,
            owner: str = "", on_output: Callable[[bytes], None] | None = None) -> ShellRun: ...

    def start(self, command: str, *, cwd: str, env: Mapping[str, str], owner: str = "") -> str: ...

    def job(self, job_id: str, *, offset: int = 0, kill: bool = False) -> JobOutput: ...

    def interrupt(self, owner: str | None = None) -> int | None:
        """Signal ``owner``'s running commands; how many were signalled (None: unknown)."""
        ...

    def release(self, owner: str) -> None: ...

    def close(self) -> None: ...


class AgentShell:
    """One agent's shell (``tools.ShellSandbox``); :meth:`for_agent` makes a subagent's.

    The first shell of a session owns the sandbox: closing it closes the
    sandbox.  A subagent's shell only ends its own jobs when it closes.
    """

    def __init__(self, sandbox: SessionSandbox, owner: str = "", *, owns_sandbox: bool = True,
                 ) -> None:
        self.sandbox = sandbox
        self.owner = owner or "agent-" + secrets.token_hex(4)
        self.backend = sandbox.backend
        self.workspace = sandbox.workspace
        self.cwd = sandbox.workspace
        self._owns_sandbox = owns_sandbox
        self._jobs: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        # Foreground runs under way (by number), and the runs an interrupt is chasing.
        self._runs = 0
        self._running: set[int] = set()
        self._settled = threading.Condition()
        self._chased: set[int] = set()
        # Held by a chase from its check to its send, and by a run while it registers: no
        # run can begin between the two, so a send meant for one run never hits the next.
        # Apart from _settled so that interrupt() and a run's end never wait on a send.
        self._sending = threading.Lock()

    def for_agent(self, owner: str) -> AgentShell:
        """A shell for another agent of this session (a subagent): same sandbox, its own state."""
        return AgentShell(self.sandbox, owner, owns_sandbox=False)

    # -- tools.ShellSandbox ------------------------------------------------------
    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout_s: float,
            on_output: Callable[[bytes], None] | None = None,
            cancelled: Callable[[], bool] | None = None) -> ShellRun:
        # Registered, then ``cancelled`` asked, under the lock an interrupt takes: the run's
        # interrupt (which cancels first, then comes here) either finds this run to chase
        # or was already seen here, and nothing starts.  Even from a signal handler on
        # this very thread (Ctrl-C in `abhed run`): the lock is reentrant, the question
        # comes after the registration.
        with self._sending, self._settled:
            self._runs += 1
            number = self._runs
            self._running.add(number)
            try:
                if cancelled is not None and cancelled():
                    raise ToolFailure("not_run", NOT_STARTED)
            except BaseException:  # never left registered: each interrupt would chase it
                self._running.discard(number)
                raise
        try:
            return self.sandbox.run(command, cwd=cwd, env=env, timeout_s=timeout_s,
                                    owner=self.owner, on_output=on_output)
        finally:
            with self._settled:
                self._running.discard(number)
                self._settled.notify_all()

    def start(self, command: str, *, cwd: str, env: Mapping[str, str]) -> str:
        job_id = self.sandbox.start(command, cwd=cwd, env=env, owner=self.owner)
        with self._lock:
            self._jobs.append(job_id)
        return job_id

    def job(self, job_id: str, *, offset: int = 0, kill: bool = False) -> JobOutput:
        with self._lock:
            mine = job_id in self._jobs
            known = ", ".join(self._jobs) or "none"
        if not mine:
            raise KeyError(f"no background job {job_id!r} in this agent's shell (jobs: {known})")
        return self.sandbox.job(job_id, offset=offset, kill=kill)

    def interrupt(self) -> None:
        """Stop this agent's running command (the agent was interrupted or ran out of time).

        A run under way may not have a command the backend can signal yet: the microVM
        still booting, the guest agent not yet handed the command, the shell between its
        spawn and its registration.  Such an interrupt would find nothing and the command
        would then run to its end, so while a run is under way and no command was
        signalled, the interrupt is sent again (after :data:`CHASE_EVERY_S`, then
        doubling) until one is, or that run returns.  Once one is, the backend's
        SIGTERM-then-SIGKILL takes its course: another SIGTERM within the grace period
        would cut short the command's own clean-up (a shell's trap runs again).

        It returns at once: the signals go from a thread of their own, so a door's event
        loop (the TUI's Esc) never waits on a guest that is slow to answer."""
        with self._settled:
            targets = self._running - self._chased
            if not targets:
                return  # no run of this agent's under way: no command to stop
            self._chased |= targets
        threading.Thread(target=self._chase, args=(targets,),
                         name=f"abhed-interrupt-{self.owner}", daemon=True).start()

    def _chase(self, targets: set[int]) -> None:
        # Only the runs under way when the interrupt came: one started after it (the next
        # command) is not its to stop.  The check and the send are under _sending, so no
        # run can begin between them.  Doubling waits, also for a backend that cannot
        # say whether it signalled anything (None).
        wait = CHASE_EVERY_S
        try:
            while True:
                with self._sending:
                    with self._settled:
                        if targets.isdisjoint(self._running):
                            return
                    signalled = self.sandbox.interrupt(self.owner)
                if signalled is not None and signalled > 0:
                    return
                with self._settled:
                    self._settled.wait_for(lambda: targets.isdisjoint(self._running),
                                           timeout=wait)
                wait = min(wait * 2, 1.0)
        finally:
            with self._settled:
                self._chased -= targets

    def close(self) -> None:
        """The agent is done: its background jobs end (and the sandbox, for the session's own)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_sandbox:
            self.sandbox.close()
        else:
            self.sandbox.release(self.owner)


def shell_for(sandbox: ShellSandbox | None, owner: str) -> ShellSandbox | None:
    """The shell a subagent named ``owner`` gets in the session's ``sandbox`` (None: none).

    Its own working directory, commands and jobs (:class:`AgentShell`); a
    sandbox that cannot tell agents apart (a test double) is shared as it is.
    """
    if isinstance(sandbox, AgentShell):
        return sandbox.for_agent(owner)
    if sandbox is not None and callable(getattr(sandbox, "release", None)):
        return AgentShell(cast(SessionSandbox, sandbox), owner, owns_sandbox=False)
    return sandbox
