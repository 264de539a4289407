"""Which accelerator boots the guest on this host, remembered across sessions.

On a host whose ``/dev/kvm`` exists but cannot run the guest (nested
virtualisation switched off, a KVM module that faults, a cloud VM that lies),
the KVM attempt only fails after its boot deadline: about 30 s, before the
software-emulated boot even starts.  Paid once per process that was every
session's first command.  The verdict is therefore kept in
``ABHED_HOME/state/sandbox-accel.json``, keyed by what decides it:

* the host kernel (``uname -r`` and ``-v``: a new kernel may fix or break KVM),
* the QEMU binary (its real path, size and modification time),
* the image (its manifest key, the digest of its inputs; and the kernel file's
  size and modification time, for images without a key).

Any change there gives a new key, so the probe runs again.  Only the outcome
of an ``accel = "auto"`` probe is stored; an explicit ``kvm`` or ``tcg`` never
reads or writes it.  An unreadable or corrupt file counts as empty: the cost
is one probe, never a wrong answer that sticks (a KVM boot that fails later is
recorded again as ``tcg``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from appliance._home import abhed_home

__all__ = ["probe_key", "recall", "recalled_reason", "remember", "state_path"]

_MAX_ENTRIES = 64  # hosts x QEMU builds x images; old keys are dropped first
_MAX_FILE_BYTES = 1 << 20


def state_path() -> Path:
    return abhed_home() / "state" / "sandbox-accel.json"


def probe_key(qemu_binary: str, kernel: Path, manifest: dict[str, Any]) -> str:
    """A digest of everything that decides whether KVM can boot this image here."""
    uname = os.uname()
    qemu = shutil.which(qemu_binary) or qemu_binary
    parts: list[str] = [uname.release, uname.version, uname.machine]
    for path in (os.path.realpath(qemu), str(kernel)):
        try:
            st = os.stat(path)
            parts += [path, str(st.st_size), str(st.st_mtime_ns)]
        except OSError:
            parts += [path, "missing"]
    key = manifest.get("key")
    parts.append(key if isinstance(key, str) else "")
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _load() -> dict[str, dict[str, Any]]:
    try:
        with open(state_path(), "rb") as fh:
            raw = fh.read(_MAX_FILE_BYTES + 1)
    except OSError:
        return {}
    if len(raw) > _MAX_FILE_BYTES:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items()
            if isinstance(k, str) and isinstance(v, dict) and v.get("accel") in ("kvm", "tcg")}


def recall(key: str) -> str | None:
    """The accelerator that booted (``kvm``) or the fallback after KVM failed (``tcg``)."""
    entry = _load().get(key)
    return str(entry["accel"]) if entry else None


def recalled_reason(key: str) -> str | None:
    """Why the remembered verdict was reached (a failed KVM boot's message), if recorded."""
    entry = _load().get(key)
    reason = entry.get("reason") if entry else None
    return reason if isinstance(reason, str) else None


def remember(key: str, accel: str, reason: str) -> None:
    """Record a probe's outcome; a failure to write only costs a probe next time."""
    data = _load()
    data.pop(key, None)
    data[key] = {"accel": accel, "reason": reason[:500], "at": int(time.time())}
    while len(data) > _MAX_ENTRIES:
        data.pop(next(iter(data)))
    path = state_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".sandbox-accel-", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
