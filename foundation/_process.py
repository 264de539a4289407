"""Children: the environment that keeps them offline, and ending one with all it started.

Children that may start their own (a shell, vLLM and its workers, an extension,
a service's health check) are started with ``start_new_session=True``, so the
child leads a process group of its own and ``killpg`` reaches its descendants.
(The microVM's guest agent keeps its own copy: it runs inside the guest with
the standard library only; see ``appliance/sandbox``.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

__all__ = ["OFFLINE_ENV", "die_with_parent", "terminate_group", "usable_cpus"]

# What a child that may load models or phone home (vLLM, transformers, the agent
# the installer probes) gets, so that it never tries to reach a hub or send usage
# statistics: the appliance works with no route out (docs/design.md, contract 9).
OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "DO_NOT_TRACK": "1",
}


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a container's or ``taskset``'s
    limit, which ``os.cpu_count`` ignores), else the machine's count; at least 1.  How
    many workers a pool may start (zstd's threads, the grep engines')."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` after which the child gets ``sig`` when its parent dies.

    A child in a session of its own (``start_new_session=True``) is out of reach of a
    terminal's signals, so a parent killed with SIGKILL (no handler runs) would leave it
    running for ever, holding its port and its GPU memory: the kernel's
    ``PR_SET_PDEATHSIG`` ends it instead.  The signal follows the *thread* that started
    the child, so start it from a thread that lives as long as the child should (the
    main thread).  A parent that died before the child got here is caught too.
    """
    import ctypes

    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent was gone before the prctl
            os.kill(os.getpid(), sig)

    return preexec


def terminate_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace_s: float = 10.0,
                    kill_wait_s: float = 5.0) -> int | None:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``grace_s``; its exit code.

    ``grace_s=0`` skips SIGTERM (for a child that has already misbehaved).  Whatever
    is left in the group once the leader has exited (workers that outlived their
    parent) is SIGKILLed too.  Never raises for a group that is already gone or
    that is not ours to signal; returns ``None`` if the leader still runs after
    ``kill_wait_s`` (stuck in the kernel: nothing more can be done from here).
    """
    if proc.poll() is None:
        steps = ((signal.SIGTERM, grace_s),) if grace_s > 0 else ()
        for sig, wait in (*steps, (signal.SIGKILL, kill_wait_s)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # workers left behind by a leader that exited
    return proc.poll()
