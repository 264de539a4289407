"""The installer's one error root, and the exit code each error maps to.

    InstallerError                 1  something failed; the message says what to do
    ├── UsageError                 2  the command line or the prefix's state does not fit the verb
    ├── BundleRefused              3  the bundle failed verification (signature, digest, format)
    ├── PreflightFailed            4  the host does not meet the bundle's platform
    ├── DowngradeRefused           5  the bundle is older than what this host has installed
    ├── StepFailed                 6  staging, pip, units or the switch failed; nothing changed
    ├── HealthCheckFailed          7  the release failed its health gate; the previous one is current
    ├── CheckFailed                8  `check` found files added, missing or altered
    ├── AuditBroken                9  the audit log's hash chain does not hold
    ├── Busy                      10  another installer holds the prefix's lock
    └── NotInstalled              11  nothing (or not that release) is installed under the prefix

Interrupted (Ctrl-C, SIGTERM) is not an error: it is a BaseException caught in
one place (``_cli.main``), exit 130 for SIGINT and 143 for SIGTERM, after the
transaction has put the host back the way it was.
"""

from __future__ import annotations

import enum

__all__ = ["AuditBroken", "BundleRefused", "Busy", "CheckFailed", "DowngradeRefused", "ExitCode",
           "HealthCheckFailed", "InstallerError", "Interrupted", "NotInstalled", "PreflightFailed",
           "StepFailed", "UsageError"]


class ExitCode(enum.IntEnum):
    """The installer's exit statuses; stable, documented in docs/installer.md."""

    OK = 0
    FAILED = 1
    USAGE = 2
    BUNDLE_REFUSED = 3
    PREFLIGHT_FAILED = 4
    DOWNGRADE_REFUSED = 5
    STEP_FAILED = 6
    HEALTH_CHECK_FAILED = 7
    CHECK_FAILED = 8
    AUDIT_BROKEN = 9
    BUSY = 10
    NOT_INSTALLED = 11
    INTERRUPTED = 130
    TERMINATED = 143


class InstallerError(Exception):
    """Root of every error the installer raises on purpose."""

    exit_code = ExitCode.FAILED


class UsageError(InstallerError):
    exit_code = ExitCode.USAGE


class BundleRefused(InstallerError):
    exit_code = ExitCode.BUNDLE_REFUSED


class PreflightFailed(InstallerError):
    exit_code = ExitCode.PREFLIGHT_FAILED


class DowngradeRefused(InstallerError):
    exit_code = ExitCode.DOWNGRADE_REFUSED


class StepFailed(InstallerError):
    exit_code = ExitCode.STEP_FAILED


class HealthCheckFailed(InstallerError):
    exit_code = ExitCode.HEALTH_CHECK_FAILED


class CheckFailed(InstallerError):
    exit_code = ExitCode.CHECK_FAILED


class AuditBroken(InstallerError):
    exit_code = ExitCode.AUDIT_BROKEN


class Busy(InstallerError):
    exit_code = ExitCode.BUSY


class NotInstalled(InstallerError):
    exit_code = ExitCode.NOT_INSTALLED


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM: unwinds like KeyboardInterrupt so every transaction restores."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
