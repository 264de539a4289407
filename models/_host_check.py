"""Is this model host serving what the site declared?  Checked before it takes traffic.

One home for the check, called by ``abhed serve`` once vLLM is healthy and by the
installer's health gate (through ``abhed serve --check-host``): the served model name
and its ``max_model_len`` (vLLM lists both on ``GET /v1/models``), vLLM's version
(``GET /version``) and the digest of the weights installed on the host against the
digest the catalog records.  A replica that answers with another model, another
context length or another vLLM would make the same turn behave differently depending
on which replica the router picked; it is refused, the error naming the field, the
declared value and the found one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from models._errors import HostMismatch, ServeError

__all__ = ["HostDeclaration", "check_model_host", "weights_digest"]

Getter = Callable[[str, float, "dict[str, str] | None"], "tuple[int, bytes]"]  # _local_get.get_local


def weights_digest(files: Mapping[str, str]) -> str:
    """One sha256 over the per-file digests (sorted ``path sha256`` lines): what a site
    declares for a model's weights, and what a host's installed weights hash to."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel} {files[rel]}\n".encode())
    return h.hexdigest()


class HostDeclaration(BaseModel):
    """What the site declared a model host serves (None: not checked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    served_name: str = Field(min_length=1, max_length=128)
    max_model_len: int | None = Field(default=None, ge=1)
    vllm_version: str | None = Field(default=None, min_length=1, max_length=64)
    weights_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


def _json(get: Getter, url: str, headers: dict[str, str] | None) -> Any:
    try:
        status, body = get(url, 5.0, headers)
    except OSError as exc:
        raise ServeError(f"model host {url} did not answer: {exc}", reason="unreachable") from None
    if status != 200:
        raise ServeError(f"model host {url} answered HTTP {status}", reason="unreachable")
    try:
        return json.loads(body)
    except ValueError:
        raise ServeError(f"model host {url} did not return JSON", reason="protocol") from None


def _refuse(root: str, field: str, declared: object, found: object) -> HostMismatch:
    return HostMismatch(f"model host {root} refused: {field} is {found!r}, the site declared "
                        f"{declared!r}; it must not take traffic until it serves what was declared",
                        field=field, declared=str(declared), found=str(found))


def check_model_host(root: str, declared: HostDeclaration, *,
                     installed_weights: Mapping[str, str] | None = None,
                     headers: dict[str, str] | None = None, get: Getter | None = None) -> None:
    """Raise :class:`HostMismatch` at the first field that differs from ``declared``.

    ``root`` is vLLM's root URL (no /v1).  ``installed_weights`` maps the host's weight
    files to their sha256 (``hash_weights`` of its weights directory); required when a
    weights digest is declared.
    """
    if get is None:
        from models._local_get import get_local

        get = get_local
    root = root.rstrip("/").removesuffix("/v1")
    listing = _json(get, root + "/v1/models", headers)
    data = listing.get("data") if isinstance(listing, dict) else None
    models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    ours = next((m for m in models if m.get("id") == declared.served_name), None)
    if ours is None:
        found = ", ".join(str(m.get("id")) for m in models) or "(none)"
        raise _refuse(root, "served_name", declared.served_name, found)
    if declared.max_model_len is not None and ours.get("max_model_len") != declared.max_model_len:
        raise _refuse(root, "max_model_len", declared.max_model_len, ours.get("max_model_len"))
    if declared.vllm_version is not None:
        version = _json(get, root + "/version", headers)
        found_version = version.get("version") if isinstance(version, dict) else None
        if found_version != declared.vllm_version:
            raise _refuse(root, "vllm_version", declared.vllm_version, found_version)
    if declared.weights_digest is not None:
        if installed_weights is None:
            raise _refuse(root, "weights_digest", declared.weights_digest, "(weights not hashed)")
        found_digest = weights_digest(installed_weights)
        if found_digest != declared.weights_digest:
            raise _refuse(root, "weights_digest", declared.weights_digest, found_digest)
