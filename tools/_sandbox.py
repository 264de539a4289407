"""The seam between the ``bash`` tool and wherever commands actually run.

``tools`` must not import ``appliance``, so the sandbox is described here as a
``Protocol`` and the appliance hands a concrete one (microVM, bubblewrap, or
the explicit host backend) to the tool through ``ToolContext.sandbox``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["JobOutput", "ShellRun", "ShellSandbox"]


@dataclass(frozen=True)
class ShellRun:
    """One finished foreground command, as the sandbox saw it.

    ``head`` and ``tail`` are the first and last bytes of the combined
    stdout+stderr; when ``output_bytes`` exceeds their total, the middle was
    dropped.  ``cwd`` is the directory the shell ended in (``None`` when the
    shell did not get to report it, e.g. it was killed).
    """

    exit_code: int | None
    signal: int | None
    timed_out: bool
    output_limited: bool
    head: bytes
    tail: bytes
    output_bytes: int
    duration_ms: float
    cwd: str | None
    #: A file holding the whole output when the middle was cut (host-side
    #: backends); the bash tool keeps it as an artifact, then removes it.
    spill_path: str | None = None


@dataclass(frozen=True)
class JobOutput:
    """A background job's state and the output from ``offset`` on."""

    job_id: str
    state: str  # "running" | "exited" | "killed"
    exit_code: int | None
    signal: int | None
    data: bytes
    offset: int
    next_offset: int
    dropped_bytes: int


class ShellSandbox(Protocol):
    """Where the ``bash`` tool runs commands, for one session.

    Implementations raise an exception (any type) only when the sandbox
    itself fails (the VM died, bubblewrap is missing); a command that fails
    is a normal :class:`ShellRun`.
    """

    #: "microvm", "bwrap" or "host": shown with every result.
    backend: str
    #: The workspace root, the same absolute path inside and outside.
    workspace: str
    #: The shell's working directory, carried from one call to the next.
    cwd: str

    def run(self, command: str, *, cwd: str, env: Mapping[str, str],
            timeout_s: float, on_output: Callable[[bytes], None] | None = None,
            cancelled: Callable[[], bool] | None = None) -> ShellRun:
        """Run a foreground command to its end.  ``on_output`` (when given) hears its
        output as it comes, from another thread, for a person watching the call; the
        result still holds all of it (head and tail) for the model.  ``cancelled`` (when
        given) is asked once the command is where :meth:`interrupt` would find it: if the
        run was interrupted, nothing starts and ``ToolFailure("not_run", NOT_STARTED)``
        is raised."""
        ...

    def start(self, command: str, *, cwd: str, env: Mapping[str, str]) -> str:
        """Start a background job; return its handle."""
        ...

    def job(self, job_id: str, *, offset: int = 0, kill: bool = False) -> JobOutput:
        """Output of a job from ``offset``; ``kill`` stops it first.  KeyError if unknown."""
        ...

    def interrupt(self) -> None:
        """Stop the running foreground command, if any (the user interrupted the run).

        Called from another thread while ``run`` waits; ``run`` then returns
        with the signal that stopped the command.  Background jobs stay.
        """
        ...

    def close(self) -> None:
        """Kill every job and release the sandbox (the session ended)."""
        ...
