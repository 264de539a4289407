"""Sandbox errors (under the appliance's root, :class:`appliance.AbhedError`).

    AbhedError
    └── SandboxError            a sandbox could not be started or stopped working
        ├── SandboxUnavailable  this backend cannot run on this host (the message says why
        │                       and what to install or configure)
        └── SandboxCrashed      it was running and died (VM exit, agent gone); start a new one

A command that fails inside a sandbox is not an error: it is a result.
"""

from __future__ import annotations

from appliance._errors import AbhedError

__all__ = ["SandboxCrashed", "SandboxError", "SandboxUnavailable"]


class SandboxError(AbhedError):
    """Root of the sandbox errors."""


class SandboxUnavailable(SandboxError):
    """This backend cannot run here."""


class SandboxCrashed(SandboxError):
    """The sandbox was running and stopped answering."""
