"""Choose and create the session's sandbox from the operator's settings."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from appliance._home import abhed_home
from appliance.sandbox._errors import SandboxUnavailable
from appliance.sandbox._local import BwrapSandbox, HostSandbox
from appliance.sandbox._microvm import MicroVM, VMImage
from appliance.sandbox._settings import SandboxSettings
from appliance.sandbox._shell import AgentShell, SessionSandbox

__all__ = ["image_dir", "open_sandbox"]


def image_dir(settings: SandboxSettings) -> Path:
    return Path(settings.image_dir) if settings.image_dir else abhed_home() / "image"


def open_sandbox(workspace: str | os.PathLike[str],
                 settings: SandboxSettings | None = None, *,
                 on_fallback: Callable[[str], None] | None = None,
                 owner: str = "") -> AgentShell:
    """The sandbox for one session, as its first agent's shell (``owner``, e.g. the session id).

    A microVM starts booting now, in the background, unless ``boot_at_open``
    is off; then it boots on its first command.  Subagents get shells of
    their own in it (:func:`shell_for`).

    ``auto`` picks the microVM when an image is installed, else bubblewrap,
    and tells ``on_fallback`` why (the doors say it, the event log records
    it); it never falls back to ``host``.  Close it when the session ends:
    that kills its background jobs and stops the VM.
    """
    return AgentShell(_backend(os.fspath(workspace), settings or SandboxSettings(), on_fallback),
                      owner)


def _backend(ws: str, settings: SandboxSettings,
             on_fallback: Callable[[str], None] | None) -> SessionSandbox:
    if settings.backend == "host":
        return HostSandbox(ws, settings)
    if settings.backend == "bwrap":
        return BwrapSandbox(ws, settings)
    if settings.backend == "microvm":
        return _started(MicroVM(ws, VMImage.load(image_dir(settings)), settings))
    try:
        return _started(MicroVM(ws, VMImage.load(image_dir(settings)), settings))
    except SandboxUnavailable as vm_problem:
        try:
            box = BwrapSandbox(ws, settings)
        except SandboxUnavailable as bwrap_problem:
            raise SandboxUnavailable(
                f"no sandbox can run here: microvm: {vm_problem}; bwrap: {bwrap_problem}. "
                "Fix one of them (see `abhed sandbox check`), or set sandbox.backend to \"host\" "
                "to run commands unsandboxed on purpose") from None
        if on_fallback is not None:
            on_fallback(f"the shell runs under bubblewrap, not a microVM: {vm_problem}. Install "
                        "the microVM image (see docs/sandbox.md) or set sandbox.backend to "
                        "\"bwrap\" to choose this on purpose")
        return box


def _started(vm: MicroVM) -> MicroVM:
    if vm.settings.boot_at_open:
        vm.boot_in_background()
    return vm
