"""The bundle package's one error root.

    BundleError
    ├── FormatError          the file is not a well-formed bundle, key or signature file
    │   └── UnsafeMember     a tar member that could escape or alias: traversal, link,
    │                        device, duplicate or unexpected name
    ├── SignatureError       not signed by enough trusted keys, or a signature that fails
    ├── DigestMismatch       a member's bytes differ from what the signed manifest declares
    ├── RollbackRefused      older than the version already installed, without a downgrade
    ├── VolumeError          a media volume is missing, duplicated, reordered, foreign or corrupt
    ├── SpecError            a build spec is malformed or names inputs that are missing or wrong
    ├── StagingError         the staging area cannot be written (not empty, full disk)
    └── ImageError           (bundle.image) a recipe, a tool or a kernel piece for the
                             microVM image is missing or wrong

Every message names what is wrong and what to do next, because the reader is
an operator at an air-gapped site with nobody to ask.
"""

from __future__ import annotations

__all__ = [
    "BundleError",
    "DigestMismatch",
    "FormatError",
    "RollbackRefused",
    "SignatureError",
    "SpecError",
    "StagingError",
    "UnsafeMember",
    "VolumeError",
]


class BundleError(Exception):
    """Root of every error the bundle package raises on purpose."""


class FormatError(BundleError):
    """The bytes are not a well-formed bundle (or key, signature, index) file."""


class UnsafeMember(FormatError):
    """A tar member whose name or type could write outside its place or alias another."""


class SignatureError(BundleError):
    """The manifest (or volume index, or rotation statement) is not trusted."""


class DigestMismatch(BundleError):
    """A member's length or sha256 differs from the signed manifest."""

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(f"member {member!r}: {reason}; the bundle is corrupt or was altered: "
                         "get a fresh copy from the source and verify it again")
        self.member = member
        self.reason = reason


class RollbackRefused(BundleError):
    """The bundle's version is older than the one recorded on the host."""

    def __init__(self, offered: int, installed: int) -> None:
        super().__init__(
            f"bundle version {offered} is older than installed version {installed}: refused "
            "as a possible rollback attack; if you really mean to go back, pass an explicit "
            "downgrade (--allow-downgrade), which is recorded in the audit log")
        self.offered = offered
        self.installed = installed


class VolumeError(BundleError):
    """A media volume (part of a split bundle) is wrong or absent."""


class SpecError(BundleError):
    """A build spec cannot be built as written."""


class StagingError(BundleError):
    """The staging area cannot take the bundle's contents."""
