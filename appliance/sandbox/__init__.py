"""Where the agent's shell runs: one :class:`~tools.ShellSandbox` per session.

Backends (see ``docs/sandbox.md``):

* :class:`MicroVM` (``microvm``): QEMU with KVM (``-M microvm``) or software
  emulation (``-M q35 -accel tcg``), workspace over virtiofs at the same path,
  no network device, a guest agent on a virtio-serial port;
* :class:`BwrapSandbox` (``bwrap``): bubblewrap + Landlock + seccomp;
* :class:`HostSandbox` (``host``): no isolation, only when set explicitly.

:func:`open_sandbox` picks one from the config; :func:`check_backends` is what
``abhed sandbox check`` prints.  Errors: :class:`SandboxError` (tree in
``appliance.sandbox._errors``).

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from appliance.sandbox._check import BackendReport, check_backends
    from appliance.sandbox._errors import SandboxCrashed, SandboxError, SandboxUnavailable
    from appliance.sandbox._local import BwrapSandbox, HostSandbox
    from appliance.sandbox._microvm import MicroVM, VMImage
    from appliance.sandbox._open import open_sandbox
    from appliance.sandbox._settings import SandboxSettings

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "BackendReport": "appliance.sandbox._check",
    "BwrapSandbox": "appliance.sandbox._local",
    "check_backends": "appliance.sandbox._check",
    "HostSandbox": "appliance.sandbox._local",
    "MicroVM": "appliance.sandbox._microvm",
    "open_sandbox": "appliance.sandbox._open",
    "SandboxCrashed": "appliance.sandbox._errors",
    "SandboxError": "appliance.sandbox._errors",
    "SandboxSettings": "appliance.sandbox._settings",
    "SandboxUnavailable": "appliance.sandbox._errors",
    "VMImage": "appliance.sandbox._microvm",
}

__all__ = [
    "BackendReport",
    "BwrapSandbox",
    "HostSandbox",
    "MicroVM",
    "SandboxCrashed",
    "SandboxError",
    "SandboxSettings",
    "SandboxUnavailable",
    "VMImage",
    "check_backends",
    "open_sandbox",
]

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
