"""Backends that run commands on this kernel: ``bwrap`` (confined) and ``host`` (not).

Both use the same :class:`~foundation.guest.Runner` as the guest agent
in the microVM, so process lifecycle (process groups, grace kill, output
caps, cwd reporting, background jobs) is identical across backends.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from appliance.sandbox._errors import SandboxUnavailable
from appliance.sandbox._settings import SandboxSettings
from foundation.guest import Runner
from tools import JobOutput, ShellRun

__all__ = ["BwrapSandbox", "HostSandbox", "base_env", "bwrap_problem", "to_job", "to_run"]

_CONFINE = Path(__file__).resolve().parent / "_confine.py"
# /etc entries a build or test needs; the rest of /etc (shadow, ssh keys,
# credentials) stays out of the sandbox.
_ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group",
        "nsswitch.conf", "localtime", "hosts", "host.conf", "mime.types", "ssl", "ca-certificates",
        "os-release", "debian_version", "gitconfig", "inputrc", "python3", "python3.11",
        "pip.conf", "environment", "shells", "protocols", "services")


def base_env(settings: SandboxSettings, extra: Mapping[str, str], home: str) -> dict[str, str]:
    """The environment a command sees: fixed basics, allow-listed host values, the caller's."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "SHELL": "/bin/bash",
        "USER": "root",
        "TMPDIR": "/tmp",
    }
    for name in settings.env_allow:
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    env.update(extra)
    return env


def _spill_dir() -> str:
    """A private host directory for whole outputs of cut commands (removed at close)."""
    return tempfile.mkdtemp(prefix="abhed-spill-")


def to_run(raw: Mapping[str, Any]) -> ShellRun:
    return ShellRun(
        exit_code=raw["exit_code"], signal=raw["signal"], timed_out=bool(raw["timed_out"]),
        output_limited=bool(raw["output_limited"]), head=base64.b64decode(raw["head_b64"]),
        tail=base64.b64decode(raw["tail_b64"]), output_bytes=int(raw["output_bytes"]),
        duration_ms=float(raw["duration_ms"]), cwd=raw.get("cwd"), spill_path=raw.get("spill_path"),
    )


def to_job(raw: Mapping[str, Any]) -> JobOutput:
    return JobOutput(
        job_id=raw["job_id"], state=raw["state"], exit_code=raw["exit_code"], signal=raw["signal"],
        data=base64.b64decode(raw["data_b64"]), offset=int(raw["offset"]),
        next_offset=int(raw["next_offset"]), dropped_bytes=int(raw["dropped_bytes"]),
    )


class _RunnerSandbox:
    backend = "host"

    def __init__(self, workspace: str, settings: SandboxSettings, runner: Runner, home: str) -> None:
        self.workspace = os.path.realpath(workspace)
        self.cwd = self.workspace
        self.settings = settings
        self._runner = runner
        self._home = home
        self._closed = False

    def _env(self, env: Mapping[str, str]) -> dict[str, str]:
        return base_env(self.settings, env, self._home)

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout_s: float,
            owner: str = "", on_output: Callable[[bytes], None] | None = None) -> ShellRun:
        return to_run(self._runner.run(command, cwd, self._env(env), timeout_s, owner, on_output))

    def start(self, command: str, *, cwd: str, env: Mapping[str, str], owner: str = "") -> str:
        return str(self._runner.start(command, cwd, self._env(env), owner)["job_id"])

    def job(self, job_id: str, *, offset: int = 0, kill: bool = False) -> JobOutput:
        return to_job(self._runner.job(job_id, offset, kill))

    def interrupt(self, owner: str | None = None) -> int:
        return self._runner.interrupt(owner)

    def release(self, owner: str) -> None:
        self._runner.release(owner)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._runner.close()
            finally:
                if self._runner.spill_dir:
                    shutil.rmtree(self._runner.spill_dir, ignore_errors=True)

    def __enter__(self) -> _RunnerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HostSandbox(_RunnerSandbox):
    """No isolation at all: commands run as this user on this host.

    Only used when the operator sets ``sandbox.backend = "host"``; every
    result says ``sandbox: host``.
    """

    backend = "host"

    def __init__(self, workspace: str, settings: SandboxSettings | None = None) -> None:
        settings = settings or SandboxSettings()
        runner = Runner(grace_s=settings.kill_grace_s, max_output_bytes=settings.max_output_bytes,
                        spill_dir=_spill_dir())
        super().__init__(workspace, settings, runner, os.path.expanduser("~"))


def _find_python() -> str | None:
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(cand, os.X_OK):
            return cand
    return None


def bwrap_problem() -> str | None:
    """Why the bwrap backend cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if _find_python() is None:
        return "no python3 under /usr to apply Landlock and seccomp inside the sandbox"
    if not os.access("/bin/bash", os.X_OK):
        return "/bin/bash is missing"
    try:
        proc = subprocess.run(["bwrap", "--unshare-all", "--unshare-user", "--cap-drop", "ALL",
                               "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
                               "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
                               "--", "/bin/true"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if proc.returncode != 0:
        return (f"bwrap cannot create a user namespace here ({proc.stderr.strip()}); enable "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)")
    return None


class BwrapSandbox(_RunnerSandbox):
    """bubblewrap: new user/pid/net/ipc/uts namespaces, no capabilities, read-only
    system, writable workspace and a private /tmp, then Landlock + seccomp.

    The host's /usr is the userland (read-only); of /etc only the entries in
    ``_ETC`` are visible; $HOME, /root, /home, /var, /run and every other host
    path are absent.  /tmp is a per-session folder (kept across calls, removed
    when the sandbox closes).  The network namespace has only ``lo``.
    """

    backend = "bwrap"

    def __init__(self, workspace: str, settings: SandboxSettings | None = None) -> None:
        settings = settings or SandboxSettings()
        problem = bwrap_problem()
        if problem:
            raise SandboxUnavailable(f"bwrap backend unavailable: {problem}")
        python = _find_python()
        assert python is not None
        ws = os.path.realpath(workspace)
        self._tmp = tempfile.mkdtemp(prefix="abhed-bwrap-tmp-")
        prefix = ["bwrap", "--unshare-all", "--unshare-user", "--cap-drop", "ALL",
                  "--die-with-parent", "--hostname", "abhed-sandbox",
                  "--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = f"/{top}"
            if os.path.islink(path):
                prefix += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                prefix += ["--ro-bind", path, path]
        for name in _ETC:
            if os.path.exists(f"/etc/{name}"):
                prefix += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        prefix += ["--proc", "/proc", "--dev", "/dev", "--bind", self._tmp, "/tmp",
                   "--bind", ws, ws, "--ro-bind", str(_CONFINE), "/run/abhed/confine.py",
                   "--chdir", ws, "--",
                   python, "-I", "-S", "/run/abhed/confine.py", ws, "/tmp", "--"]

        def wrap(argv: list[str], cwd: str) -> list[str]:
            return prefix + argv

        runner = Runner(wrap=wrap, grace_s=settings.kill_grace_s,
                        max_output_bytes=settings.max_output_bytes, spill_dir=_spill_dir())
        super().__init__(ws, settings, runner, "/tmp")

    def close(self) -> None:
        super().close()
        shutil.rmtree(self._tmp, ignore_errors=True)
