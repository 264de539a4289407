"""What a release's files should be, and how ``check`` compares them (like ``rpm -V``).

At install, after the venv is built and before the switch, every file under
the release directory is written to ``record.json``: sha256, size, mode and
owner of each regular file, the target and owner of each symbolic link (a
re-owned file or link matters as much as an edited one: the agent trusts the
site's settings only while root owns them).  Files unpacked from
the bundle take their hash from the signed manifest (they were hashed as
they streamed; weights are not read a second time).  The record's own sha256
goes into the audit log, so the record cannot be edited to hide a change
without breaking the audit chain.  ``check`` re-hashes every file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from foundation import digest_file, parse_document, read_regular, validate_document

__all__ = ["RECORD_NAME", "CheckResult", "LoadedRecord", "compare_tree", "load_record",
           "record_tree"]

RECORD_NAME = "record.json"
COMPLETE_NAME = ".complete"  # written last, at commit: not part of the record
_SKIP = {RECORD_NAME, COMPLETE_NAME}
RECORD_FORMAT = "abhed-installer-record/1"


def _walk(root: Path) -> list[tuple[str, os.stat_result]]:
    out: list[tuple[str, os.stat_result]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        names = sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in names:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            out.append((rel, os.lstat(os.path.join(dirpath, name))))
    return out


def record_tree(root: Path, known: Mapping[str, tuple[str, int]]) -> dict[str, Any]:
    """Describe every file under ``root`` (``known``: rel -> (sha256, size) already proven)."""
    files: dict[str, dict[str, Any]] = {}
    for rel, st in _walk(root):
        if rel in _SKIP:
            continue
        owner = f"{st.st_uid}:{st.st_gid}"
        if stat.S_ISLNK(st.st_mode):
            files[rel] = {"type": "link", "target": os.readlink(root / rel), "owner": owner}
        elif stat.S_ISREG(st.st_mode):
            digest = known[rel][0] if rel in known and known[rel][1] == st.st_size \
                else digest_file(root / rel).sha256
            files[rel] = {"type": "file", "sha256": digest, "size": st.st_size,
                          "mode": oct(stat.S_IMODE(st.st_mode)), "owner": owner}
        else:
            files[rel] = {"type": "other"}
    return {"format": RECORD_FORMAT, "files": files}


MAX_RECORD_BYTES = 256 << 20  # a file per line of the venv and the bundle: tens of MiB at most


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["file", "link", "other"]
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    size: int | None = Field(default=None, ge=0)
    mode: str | None = Field(default=None, pattern=r"^0o[0-7]{1,4}$")
    target: str | None = None
    owner: str | None = Field(default=None, pattern=r"^\d+:\d+$")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["abhed-installer-record/1"]
    files: dict[str, _Entry]


@dataclass(frozen=True)
class LoadedRecord:
    """A record's files (as :func:`record_tree` wrote them) and the sha256 of the very bytes read."""

    files: dict[str, dict[str, Any]]
    sha256: str


def load_record(path: Path) -> LoadedRecord:
    """Read ``record.json`` once, strictly; the digest is of the bytes that were parsed.

    Raises:
        FoundationError: unreadable, not a regular file, or invalid (every problem, located).
    """
    data = read_regular(path, MAX_RECORD_BYTES, "release record")
    raw = parse_document(data, what="release record", source=path, syntax="json")
    record = validate_document(raw, _Record, what="release record", source=path)
    return LoadedRecord({rel: e.model_dump(exclude_none=True) for rel, e in record.files.items()},
                        hashlib.sha256(data).hexdigest())


@dataclass
class CheckResult:
    added: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    altered: list[tuple[str, str]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.added or self.missing or self.altered)


def compare_tree(root: Path, expected: Mapping[str, Mapping[str, Any]]) -> CheckResult:
    """Re-hash everything under ``root`` and compare it with ``expected``."""
    result = CheckResult()
    seen: set[str] = set()
    for rel, st in _walk(root):
        if rel in _SKIP:
            continue
        seen.add(rel)
        want = expected.get(rel)
        if want is None:
            result.added.append(rel)
            continue
        kind = want.get("type")
        owner = f"{st.st_uid}:{st.st_gid}"
        # Records written before owners were recorded have none: nothing to compare.
        reowned = [f"owner {owner}, expected {want['owner']}"] \
            if "owner" in want and owner != want["owner"] else []
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(root / rel)
            if kind != "link":
                result.altered.append((rel, f"is a symbolic link to {target}, was a {kind}"))
            elif target != want.get("target"):
                result.altered.append((rel, f"link target {target}, expected {want.get('target')}"))
            elif reowned:
                result.altered.append((rel, reowned[0]))
        elif stat.S_ISREG(st.st_mode):
            if kind != "file":
                result.altered.append((rel, f"is a regular file, was a {kind}"))
                continue
            reasons = []
            if st.st_size != want.get("size"):
                reasons.append(f"size {st.st_size}, expected {want.get('size')}")
            digest = digest_file(root / rel).sha256
            if digest != want.get("sha256"):
                reasons.append(f"sha256 {digest[:16]}…, expected {str(want.get('sha256'))[:16]}…")
            mode = oct(stat.S_IMODE(st.st_mode))
            if "mode" in want and mode != want["mode"]:
                reasons.append(f"mode {mode}, expected {want['mode']}")
            reasons += reowned
            if reasons:
                result.altered.append((rel, "; ".join(reasons)))
        else:
            result.altered.append((rel, "is not a regular file or link"))
    result.missing = sorted(set(expected) - seen)
    return result
