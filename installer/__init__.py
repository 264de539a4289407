"""abhed-installer: verify, install, upgrade, roll back, check and remove Abhed offline.

The installer is one self-contained binary (frozen with PyInstaller from
``installer/abhed-installer.spec``; build it with ``scripts/build-installer``).
It depends on ``bundle`` only and never imports the agent: the release it
installs is run as commands from the release's own venv (its model server,
its ``abhed``), so the binary stays small and the installed code is what is
tested by the health gate.

Public surface: :func:`main` (the command line), :class:`ExitCode`, and the
errors::

    InstallerError
    ├── UsageError           2
    ├── BundleRefused        3
    ├── PreflightFailed      4
    ├── DowngradeRefused     5
    ├── StepFailed           6
    ├── HealthCheckFailed    7
    ├── CheckFailed          8
    ├── AuditBroken          9
    ├── Busy                10
    └── NotInstalled        11

``docs/installer.md`` is the operator guide.
"""

from __future__ import annotations

from ._cli import main
from ._errors import (
                      AuditBroken,
                      BundleRefused,
                      Busy,
                      CheckFailed,
                      DowngradeRefused,
                      ExitCode,
                      HealthCheckFailed,
                      InstallerError,
                      NotInstalled,
                      PreflightFailed,
                      StepFailed,
                      UsageError,
)

__all__ = [
    "AuditBroken",
    "BundleRefused",
    "Busy",
    "CheckFailed",
    "DowngradeRefused",
    "ExitCode",
    "HealthCheckFailed",
    "InstallerError",
    "NotInstalled",
    "PreflightFailed",
    "StepFailed",
    "UsageError",
    "main",
]
