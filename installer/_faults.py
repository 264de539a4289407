"""Named fault points, so the tests of the frozen binary can fail it at any step.

``ABHED_INSTALLER_FAULT=<point>[:<how>]`` makes the installer fail when it
reaches ``<point>``: ``raise`` (default) an OSError, ``sigint``/``sigterm``
itself, or ``kill`` itself with SIGKILL (a power cut: nothing restores, and the
next command must clean up).  Points are listed in docs/installer.md.  A fault
can only make the installer fail, never skip a check, so the variable is
harmless in production; it is recorded in the audit log when it fires.
"""

from __future__ import annotations

import errno
import os
import signal

__all__ = ["fault_point"]

# The points themselves are derived from the deploy steps:
# installer._stage.FAULT_POINTS (each step names the points it holds).


def fault_point(name: str) -> None:
    """Fail here if ``ABHED_INSTALLER_FAULT`` names this point."""
    spec = os.environ.get("ABHED_INSTALLER_FAULT", "")
    point, _, how = spec.partition(":")
    if point != name:
        return
    how = how or "raise"
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "sigint":
        os.kill(os.getpid(), signal.SIGINT)
        return
    if how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise OSError(errno.EIO, f"injected fault at {name!r} (ABHED_INSTALLER_FAULT)")
