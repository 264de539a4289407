"""The publisher keys this host pins: given once at first install, then used for every verify.

Pinning on first use is the same bargain ssh makes: the operator checks the
key fingerprint against the publisher's paper record at first install; after
that a bundle signed by any other key is refused, and ``--trust`` cannot
quietly replace the pinned keys.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from foundation import load_if_present, reraised_as

from ._errors import BundleRefused, UsageError
from ._layout import Layout, atomic_write

if TYPE_CHECKING:
    from bundle import TrustPolicy

__all__ = ["TRUST_FORMAT", "pin_trust", "resolve_trust"]

TRUST_FORMAT = "abhed-installer-trust/1"


def _read_keys(files: Sequence[Path]) -> list[Any]:
    from bundle import BundleError, PublicKey, open_regular

    keys = []
    for f in files:
        try:
            # Never a plain open(): it would wait forever on a FIFO named as the key.
            with open_regular(f, "public key") as fh:
                raw = fh.read(65537)
        except OSError as exc:
            raise UsageError(f"cannot read public key {f}: {exc.strerror}") from None
        except BundleError as exc:
            raise UsageError(f"cannot read {exc}") from None
        try:
            if len(raw) > 65536:
                raise ValueError("over 64 KiB")
            text = raw.decode("utf-8")
        except (UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"{f} is not a minisign public key ({exc}); pass the "
                             "publisher's .pub file") from None
        try:
            keys.append(PublicKey.from_text(text))
        except BundleError as exc:
            raise UsageError(f"{f} is not a minisign public key: {exc}") from None
    return keys


class _Pinned(BaseModel):
    """``state/trust.json``, as :func:`pin_trust` writes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["abhed-installer-trust/1"]
    keys: list[str] = Field(max_length=64)
    threshold: int = Field(ge=1)


def _pinned(layout: Layout) -> tuple[list[str], int] | None:
    with reraised_as(BundleRefused):
        pinned = load_if_present(layout.state_dir / "trust.json", _Pinned, what="pinned keys",
                                 cap=1 << 20, hint="The pinned keys were damaged; restore the "
                                 "file from a backup (its hash is in the audit log).")
    return None if pinned is None else (pinned.keys, pinned.threshold)


def resolve_trust(layout: Layout | None, trust_files: Sequence[Path],
                  threshold: int | None) -> tuple[TrustPolicy, bool]:
    """The policy to verify with, and whether it is already pinned on this host."""
    from bundle import BundleError, PublicKey, TrustPolicy

    pinned = _pinned(layout) if layout is not None else None
    given = _read_keys(trust_files)
    try:
        if pinned is not None:
            keys = tuple(PublicKey.from_base64(k) for k in pinned[0])
            policy = TrustPolicy(keys=keys, threshold=pinned[1])
            if given and {k.id_hex for k in given} != {k.id_hex for k in keys}:
                raise BundleRefused(
                    f"this host pins key(s) {', '.join(k.id_hex for k in keys)}; --trust names "
                    f"{', '.join(k.id_hex for k in given)}. Pinned keys are never replaced from "
                    "the command line: verify with the pinned keys (omit --trust), or uninstall "
                    "and install afresh if the publisher really changed keys")
            return policy, True
        if not given:
            where = f" ({layout.state_dir / 'trust.json'} does not exist)" if layout else ""
            raise UsageError("no trusted key: pass the publisher's public key with --trust "
                             f"FILE.pub (it is pinned at first install){where}")
        return TrustPolicy(keys=tuple(given), threshold=threshold or 1), False
    except BundleError as exc:
        raise UsageError(str(exc)) from None


def pin_trust(layout: Layout, policy: TrustPolicy) -> str:
    """Write state/trust.json; returns its sha256 for the audit log."""
    import hashlib

    body = {"format": TRUST_FORMAT, "threshold": policy.threshold,
            "keys": [k.to_base64() for k in policy.keys]}
    data = (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(layout.state_dir / "trust.json", data)
    return hashlib.sha256(data).hexdigest()
