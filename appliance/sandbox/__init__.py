"""Where the agent's shell runs: one :class:`~tools.ShellSandbox` per session.

Backends (see ``docs/sandbox.md``):

* :class:`MicroVM` (``microvm``): QEMU with KVM (``-M microvm``) or software
  emulation (``-M q35 -accel tcg``), workspace over virtiofs at the same path,
  no network device, a guest agent on a virtio-serial port;
* :class:`BwrapSandbox` (``bwrap``): bubblewrap + Landlock + seccomp;
* :class:`HostSandbox` (``host``): no isolation, only when set explicitly.

:func:`open_sandbox` picks one from the config and returns the session's
first :class:`AgentShell`; :func:`shell_for` gives each subagent a shell of
its own in the same sandbox (its own working directory, commands and jobs).
:func:`check_backends` is what ``abhed sandbox check`` prints; :func:`kvm_status` says
whether KVM boots the microVM here and why not.  Errors: :class:`SandboxError` (tree in
``appliance.sandbox._errors``).
"""

from __future__ import annotations

from appliance.sandbox._check import BackendReport, check_backends, kvm_status
from appliance.sandbox._errors import SandboxCrashed, SandboxError, SandboxUnavailable
from appliance.sandbox._local import BwrapSandbox, HostSandbox
from appliance.sandbox._microvm import MicroVM, VMImage
from appliance.sandbox._open import open_sandbox
from appliance.sandbox._settings import SandboxSettings
from appliance.sandbox._shell import AgentShell, SessionSandbox, shell_for

__all__ = [
    "AgentShell",
    "BackendReport",
    "BwrapSandbox",
    "HostSandbox",
    "MicroVM",
    "SandboxCrashed",
    "SandboxError",
    "SandboxSettings",
    "SandboxUnavailable",
    "SessionSandbox",
    "VMImage",
    "check_backends",
    "kvm_status",
    "open_sandbox",
    "shell_for",
]
