"""Verify a bundle: the signature first, then every member in one streaming pass.

Order of checks, and why:

1. The first member must be ``manifest.json`` (capped at 8 MiB, refused
   unread if larger) and the second ``manifest.json.minisig`` (capped).
2. The signatures are checked over the manifest's raw bytes against the
   pinned keys and threshold.  Nothing else is parsed, hashed or written
   before this succeeds (Zarf hashes every file before looking at the
   signature; we do not).
3. Only then is the manifest parsed (strictly) and its version compared with
   the one recorded on the host: an older one is refused unless the caller
   passes an explicit downgrade, which it must record.  No clock is consulted.
4. The payload members are read in manifest order, each once: the header
   size must equal the declared size before any data is read, the data is
   hashed as it streams, and, when a staging directory is given, unpacked
   into it with the uncompressed size capped at the declared size.  Unknown,
   missing, duplicated or reordered members are named.
5. On any failure the staging directory is removed; nothing is ever written
   outside it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, cast

from ._errors import DigestMismatch, FormatError, RollbackRefused, StagingError
from ._manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    SIGNATURE_NAME,
    Manifest,
    Member,
    parse_manifest,
    staged_name,
)
from ._minisign import MAX_SIGNATURE_FILE_BYTES, Signature, parse_signatures
from ._regular import open_regular
from ._tar import TarReader
from ._trust import TrustPolicy, check_threshold

__all__ = ["Progress", "VerifiedBundle", "open_bundle_file", "read_head", "verify_bundle"]

Progress = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while members stream."""

_ZSTD_MAX_WINDOW = 1 << 27  # 128 MiB: the most memory a hostile zstd frame can make us use


@dataclass(frozen=True)
class VerifiedBundle:
    """What a successful verification proved.

    Attributes:
        manifest: the signed manifest, parsed.
        signers: hex key ids of the trusted keys whose signatures verified.
        downgrade: True when the bundle is older than ``installed_version`` and
            the caller allowed it; the caller must record that in its audit log.
        staged: the staging directory holding the unpacked members, or None.
    """

    manifest: Manifest
    signers: tuple[str, ...]
    downgrade: bool
    staged: Path | None


def open_bundle_file(path: Path) -> BinaryIO:
    """Open the bundle, refusing a FIFO, device or directory without blocking on it."""
    return open_regular(path, "bundle")


def read_head(reader: TarReader) -> tuple[bytes, list[Signature]]:
    """The manifest's raw bytes and its signature blocks: the bundle's first two members."""
    first = reader.next_member()
    if first is None:
        raise FormatError("the bundle is an empty archive")
    if first.name != MANIFEST_NAME:
        raise FormatError(f"the first member is {first.name!r}, not {MANIFEST_NAME!r}: not a "
                          "bundle, or its members were reordered")
    manifest = reader.read_all(MAX_MANIFEST_BYTES)
    second = reader.next_member()
    if second is None or second.name != SIGNATURE_NAME:
        found = "nothing" if second is None else repr(second.name)
        raise FormatError(f"the second member is {found}, not {SIGNATURE_NAME!r}: the bundle "
                          "is unsigned or its signature was stripped; refused")
    sigs = parse_signatures(reader.read_all(MAX_SIGNATURE_FILE_BYTES))
    return manifest, sigs


class _Sink:
    """Writes one member's content into staging, hashing and capping it."""

    def __init__(self, member: Member, dest: Path | None) -> None:
        self.member = member
        # An uncompressed member's content hash is its stored hash: computed once, outside.
        self._hashing = member.compression != "none"
        self.hash = hashlib.sha256()
        self.size = 0
        self._fd = -1
        if dest is not None:
            dest.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            self._fd = os.open(dest, flags, 0o644)

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.member.content_size:
            raise DigestMismatch(self.member.name, "unpacks to more than its declared "
                                 f"{self.member.content_size} bytes")
        if self._hashing:
            self.hash.update(data)
        if self._fd >= 0:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        return len(data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _stream_member(reader: TarReader, member: Member, dest: Path | None,
                   tick: Callable[[int], None]) -> None:
    outer = hashlib.sha256()
    if dest is None:
        for chunk in reader.data():
            outer.update(chunk)
            tick(len(chunk))
        if outer.hexdigest() != member.sha256:
            raise DigestMismatch(member.name, "sha256 differs from the manifest")
        return
    sink = _Sink(member, dest)
    try:
        if member.compression == "zstd":
            import zstandard  # lazily: verifying without staging never decompresses

            dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
            writer = dctx.stream_writer(cast(IO[bytes], sink), write_size=1 << 20, closefd=False)
            try:
                for chunk in reader.data():
                    outer.update(chunk)
                    writer.write(chunk)
                    tick(len(chunk))
                writer.flush()  # type: ignore[no-untyped-call]
            except zstandard.ZstdError as exc:
                raise DigestMismatch(member.name, f"is not valid zstd data ({exc})") from None
        else:
            for chunk in reader.data():
                outer.update(chunk)
                sink.write(chunk)
                tick(len(chunk))
    finally:
        sink.close()
    if outer.hexdigest() != member.sha256:
        raise DigestMismatch(member.name, "sha256 differs from the manifest")
    if sink.size != member.content_size:
        raise DigestMismatch(member.name, f"unpacks to {sink.size} bytes, the manifest "
                             f"says {member.content_size}")
    content = sink.hash if member.compression != "none" else outer
    if content.hexdigest() != member.content_sha256:
        raise DigestMismatch(member.name, "unpacked content's sha256 differs from the manifest")


def _prepare_staging(stage_to: Path, manifest: Manifest, only: Collection[str] | None) -> None:
    if stage_to.exists() or stage_to.is_symlink():
        raise StagingError(f"staging directory {stage_to} already exists; pass a path that "
                           "does not exist yet (it is created, and removed on failure)")
    parent = stage_to.parent
    if not parent.is_dir():
        raise StagingError(f"staging parent {parent} is not a directory")
    need = sum(m.content_size for m in manifest.members if only is None or m.name in only)
    free = shutil.disk_usage(parent).free
    if need > free:
        raise StagingError(f"staging needs {need} bytes but {parent} has {free} free; free "
                           "space or pass a staging directory on a larger disk")
    stage_to.mkdir()


def _check_version(manifest: Manifest, installed_version: int | None,
                   allow_downgrade: bool) -> bool:
    if installed_version is None or manifest.version >= installed_version:
        return False
    if not allow_downgrade:
        raise RollbackRefused(manifest.version, installed_version)
    return True


def verify_bundle(path: Path, trust: TrustPolicy, *, installed_version: int | None = None,
                  allow_downgrade: bool = False, stage_to: Path | None = None,
                  progress: Progress | None = None,
                  only: Collection[str] | None = None) -> VerifiedBundle:
    """Verify the bundle at ``path`` against ``trust``; optionally unpack it into staging.

    Args:
        path: the bundle file.
        trust: pinned keys and threshold.
        installed_version: the version recorded on the host, if any; an older
            bundle raises RollbackRefused unless ``allow_downgrade``.
        allow_downgrade: the operator's explicit consent to go back.
        stage_to: a directory that must not exist yet; members are unpacked
            into it (``.zst`` members decompressed).  Removed on any failure.
        progress: called with (bytes_done, bytes_total) as members stream.
        only: the members (as stored) to unpack into ``stage_to``; the others are
            still read and hashed, never written (a host role's members:
            ``Manifest.role_files``).  None: every member.

    Raises:
        BundleError: a subclass naming what is wrong; nothing outside
            ``stage_to`` has been written, and ``stage_to`` has been removed.
    """
    with open_bundle_file(path) as f:
        reader = TarReader(f, label=str(path))
        raw_manifest, sigs = read_head(reader)
        signers = check_threshold(raw_manifest, sigs, trust, "the manifest")
        manifest = parse_manifest(raw_manifest)
        downgrade = _check_version(manifest, installed_version, allow_downgrade)
        if stage_to is not None:
            _prepare_staging(stage_to, manifest, only)
        try:
            _stream_all(reader, manifest, stage_to, progress, only)
        except BaseException as exc:
            if stage_to is not None:
                shutil.rmtree(stage_to, ignore_errors=True)
            if isinstance(exc, OSError) and stage_to is not None:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                    raise StagingError(f"staging ran out of space in {stage_to.parent} "
                                       f"({exc.strerror}); the partial staging was removed: "
                                       "free space and verify again") from None
                raise StagingError(f"cannot write staging in {stage_to} ({exc.strerror}); "
                                   "the partial staging was removed") from None
            raise
    return VerifiedBundle(manifest=manifest, signers=signers, downgrade=downgrade,
                          staged=stage_to)


def _stream_all(reader: TarReader, manifest: Manifest, stage_to: Path | None,
                progress: Progress | None, only: Collection[str] | None = None) -> None:
    total = manifest.payload_size
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    expected = {m.name: i for i, m in enumerate(manifest.members)}
    for index, member in enumerate(manifest.members):
        header = reader.next_member()
        if header is None:
            raise FormatError(f"the bundle ends before member {member.name!r} "
                              f"({len(manifest.members) - index} member(s) missing)")
        if header.name != member.name:
            at = expected.get(header.name)
            if at is None:
                raise FormatError(f"member {header.name!r} is not in the signed manifest: "
                                  "refused (something was added)")
            if at < index:
                raise FormatError(f"member {header.name!r} appears twice: refused")
            raise FormatError(f"member {header.name!r} comes where {member.name!r} should: "
                              "members are missing or out of order")
        if header.size != member.size:
            raise DigestMismatch(member.name, f"the tar says {header.size} bytes, the manifest "
                                 f"{member.size}")
        unpack = stage_to is not None and (only is None or member.name in only)
        dest = stage_to / staged_name(member) if stage_to is not None and unpack else None
        _stream_member(reader, member, dest, tick)
    extra = reader.next_member()
    if extra is not None:
        seen = "appears twice" if extra.name in expected else "is not in the signed manifest"
        raise FormatError(f"member {extra.name!r} {seen}: refused")
