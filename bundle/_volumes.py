"""Split a bundle into volumes for removable media, and join them back.

``split`` writes ``NAME.001``, ``NAME.002``, ... and a *volume index*
``NAME.volumes.json`` with its signature ``NAME.volumes.json.minisig``: the
bundle's size and sha256, the part size, and each part's size and sha256,
signed by the same keys as the bundle.  Copy the index and its signature onto
every medium.

``join`` checks the index signature first, then appends the parts in order to
``OUT.partial``, hashing each as it is read.  A part that is missing, holds
another part's bytes (renamed, reordered or duplicated), or matches no part
(corrupt, or from another bundle) is named, and the partial output is cut back
to the last good part.  Run ``join`` again with the next medium mounted: it
re-checks the parts already joined and resumes after them.  Zarf records
split-package checksums and never checks them; here nothing is trusted
unchecked.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, model_validator

from foundation import DocumentError, validate_document

from ._build import BuildProgress
from ._errors import BundleError, FormatError, VolumeError
from ._manifest import canonical_json, strict_json
from ._minisign import MAX_SIGNATURE_FILE_BYTES, SecretKey, parse_signatures
from ._regular import open_regular
from ._tar import CHUNK
from ._trust import TrustPolicy, check_threshold, sign_set

__all__ = ["JoinResult", "VolumeIndex", "join_volumes", "split_bundle"]

INDEX_FORMAT = "abhed-volumes/1"
MAX_INDEX_BYTES = 1024 * 1024
MAX_PARTS = 9999
_PART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=@~,-]{0,250}$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class VolumePart(_Model):
    index: int = Field(ge=1)
    name: str = Field(pattern=_PART_NAME.pattern)
    size: int = Field(ge=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class VolumeIndex(_Model):
    """The signed list of a split bundle's parts."""

    format: str = Field(pattern=r"^abhed-volumes/1$")
    bundle: str = Field(pattern=_PART_NAME.pattern)
    size: int = Field(ge=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    part_size: int = Field(ge=1)
    parts: tuple[VolumePart, ...] = Field(min_length=1, max_length=MAX_PARTS)

    @model_validator(mode="after")
    def _coherent(self) -> VolumeIndex:
        for i, p in enumerate(self.parts, 1):
            if p.index != i:
                raise ValueError(f"parts are not numbered 1..n in order (entry {i} is {p.index})")
            if p.size > self.part_size or (p.size != self.part_size and i != len(self.parts)):
                raise ValueError(f"part {i} has size {p.size}; only the last may be shorter "
                                 f"than part_size {self.part_size}")
        if sum(p.size for p in self.parts) != self.size:
            raise ValueError("the parts' sizes do not add up to the bundle size")
        if len({p.name for p in self.parts}) != len(self.parts):
            raise ValueError("two parts share a name")
        return self


def index_path_for(bundle_name: str, directory: Path) -> Path:
    return directory / f"{bundle_name}.volumes.json"


def split_bundle(path: Path, out_dir: Path, part_size: int, keys: Sequence[SecretKey], *,
                 progress: BuildProgress | None = None) -> Path:
    """Split ``path`` into parts of ``part_size`` bytes in ``out_dir``; return the index path."""
    if part_size < 1:
        raise VolumeError("the part size must be at least 1 byte")
    with open_regular(path, "bundle") as probe:
        total = os.fstat(probe.fileno()).st_size
    count = -(-total // part_size)
    if total == 0 or count > MAX_PARTS:
        raise VolumeError(f"{total} bytes in parts of {part_size} makes {count} parts; "
                          f"between 1 and {MAX_PARTS} are allowed: choose another --size")
    width = max(3, len(str(count)))
    whole = hashlib.sha256()
    parts: list[VolumePart] = []
    done = 0
    with open_regular(path, "bundle") as f:
        for i in range(1, count + 1):
            name = f"{path.name}.{i:0{width}d}"
            dest = out_dir / name
            h = hashlib.sha256()
            size = 0
            with open(dest, "xb") as out:
                while size < part_size:
                    chunk = f.read(min(CHUNK, part_size - size))
                    if not chunk:
                        break
                    h.update(chunk)
                    whole.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress("split", done, total)
                out.flush()
                os.fsync(out.fileno())
            parts.append(VolumePart(index=i, name=name, size=size, sha256=h.hexdigest()))
    index = VolumeIndex(format=INDEX_FORMAT, bundle=path.name, size=total,
                        sha256=whole.hexdigest(), part_size=part_size, parts=tuple(parts))
    raw = canonical_json(index.model_dump(mode="json"))
    ipath = index_path_for(path.name, out_dir)
    ipath.write_bytes(raw)
    Path(f"{ipath}.minisig").write_bytes(
        sign_set(raw, keys, f"abhed-volumes {path.name} {count} parts"))
    return ipath


def read_index(index_path: Path, trust: TrustPolicy) -> VolumeIndex:
    """The volume index at ``index_path``, after its signature has been checked."""
    try:
        with open_regular(index_path, "volume index") as f:
            raw = f.read(MAX_INDEX_BYTES + 1)
        with open_regular(f"{index_path}.minisig", "volume index signature") as f:
            sig = f.read(MAX_SIGNATURE_FILE_BYTES + 1)
    except OSError as exc:
        raise VolumeError(f"cannot read the volume index or its signature ({exc.filename}: "
                          f"{exc.strerror}); copy NAME.volumes.json and its .minisig from "
                          "the first medium") from None
    except BundleError as exc:
        raise VolumeError(f"cannot read the volume index or its signature ({exc}); copy "
                          "NAME.volumes.json and its .minisig from the first medium") from None
    check_threshold(raw, parse_signatures(sig), trust, "the volume index")
    try:
        return validate_document(strict_json(raw, "the volume index", MAX_INDEX_BYTES),
                                 VolumeIndex, what="the volume index", source=str(index_path))
    except DocumentError as exc:
        raise FormatError(str(exc)) from None


@dataclass(frozen=True)
class JoinResult:
    """The joined bundle and how many parts an earlier, interrupted join had done."""

    path: Path
    index: VolumeIndex
    resumed_parts: int


def _hash_range(f: os.PathLike[str] | Path, start: int, size: int) -> str:
    h = hashlib.sha256()
    with open(f, "rb") as fh:
        fh.seek(start)
        left = size
        while left:
            chunk = fh.read(min(CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def join_volumes(index_path: Path, out: Path, trust: TrustPolicy, *,
                 search_dirs: Sequence[Path] = (),
                 progress: BuildProgress | None = None) -> JoinResult:
    """Join the parts listed in the signed index into ``out``, resuming an earlier join.

    Parts are looked for beside the index, then in ``search_dirs``.

    Raises:
        SignatureError: the index is not signed by the trusted keys.
        VolumeError: a part is missing, misplaced, duplicated, foreign or corrupt (named);
            ``OUT.partial`` keeps every good part before it, for the next run.
    """
    index = read_index(index_path, trust)
    if out.exists():
        raise VolumeError(f"{out} already exists; remove it or choose another --out")
    partial = out.with_name(out.name + ".partial")
    dirs = [index_path.parent, *search_dirs]
    by_digest = {p.sha256: p.index for p in index.parts}
    whole = hashlib.sha256()
    resumed = 0
    offset = 0
    have = partial.stat().st_size if partial.exists() else 0
    # Re-check what an earlier run joined, part by part; keep the good prefix.
    for part in index.parts:
        if have < offset + part.size or _hash_range(partial, offset, part.size) != part.sha256:
            break
        with open(partial, "rb") as fh:
            fh.seek(offset)
            left = part.size
            while left:
                chunk = fh.read(min(CHUNK, left))
                whole.update(chunk)
                left -= len(chunk)
        offset += part.size
        resumed += 1
    with open(partial, "r+b" if partial.exists() else "xb") as fout:
        fout.truncate(offset)
        for part in index.parts[resumed:]:
            whole = _append_part(part, dirs, fout, whole, by_digest, index, offset, progress)
            offset += part.size
        fout.flush()
        os.fsync(fout.fileno())
    if whole.hexdigest() != index.sha256:  # unreachable unless the index lies; still checked
        raise VolumeError("the joined bundle's sha256 differs from the signed index")
    os.replace(partial, out)
    return JoinResult(path=out, index=index, resumed_parts=resumed)


def _append_part(part: VolumePart, dirs: list[Path], fout: BinaryIO, whole: Any,
                 by_digest: dict[str, int], index: VolumeIndex, offset: int,
                 progress: BuildProgress | None) -> Any:
    """Append one part, trying each copy found; return the whole-bundle hash advanced."""
    # exists(), not is_file(): a FIFO or device under a part's name is named as refused.
    candidates = [d / part.name for d in dirs if (d / part.name).exists()]
    n = len(index.parts)
    if not candidates:
        where = ", ".join(str(d) for d in dirs)
        raise VolumeError(f"part {part.index} of {n} ({part.name}) is missing from {where}: "
                          "mount the medium that holds it and run join again (it resumes "
                          f"after part {part.index - 1})")
    faults: list[str] = []
    for path in candidates:
        h = hashlib.sha256()
        copy = whole.copy()
        fout.seek(offset)
        fout.truncate(offset)
        size = 0
        try:
            with open_regular(path, "volume part") as fin:
                while chunk := fin.read(CHUNK):
                    size += len(chunk)
                    if size > index.part_size:
                        break
                    h.update(chunk)
                    copy.update(chunk)
                    fout.write(chunk)
                    if progress is not None:
                        progress("join", offset + size, index.size)
        except OSError as exc:
            faults.append(f"{path}: unreadable ({exc.strerror}): the medium may be damaged")
            continue
        except BundleError as exc:
            faults.append(str(exc))
            continue
        digest = h.hexdigest()
        if size == part.size and digest == part.sha256:
            return copy
        other = by_digest.get(digest) if size <= index.part_size else None
        if other is not None:
            faults.append(f"{path} holds part {other}'s bytes, not part {part.index}'s: the "
                          "volumes were renamed, reordered or duplicated")
        else:
            faults.append(f"{path} is corrupt or belongs to another bundle ({size} bytes, "
                          "sha256 matching no part of this set)")
    fout.seek(offset)
    fout.truncate(offset)
    fout.flush()
    raise VolumeError(f"part {part.index} of {n} ({part.name}) is wrong: {'; '.join(faults)}. "
                      f"Parts 1..{part.index - 1} are kept; copy a good part {part.index} and "
                      "run join again")
