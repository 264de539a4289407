"""The bundle's SBOM: CycloneDX 1.6 JSON, written deterministically.

It covers every wheel (``pkg:pypi`` purls with SHA-256), each model (an ML-BOM
``machine-learning-model`` component with its files, licence and source), the
microVM image's files and Debian packages (``pkg:deb`` purls), the installer
binary and the docs.  The serial number is derived from the content, and the
timestamp appears only when the spec fixes ``source_date_epoch``, so the same
inputs always give the same bytes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._manifest import canonical_json

__all__ = ["SbomComponent", "SbomFile", "render_sbom", "summarize_sbom"]

SPEC_VERSION = "1.6"
_NAMESPACE = uuid.UUID("0f6b1f7e-4a5c-5b8e-9a57-2a3d6c1b9e01")


@dataclass(frozen=True)
class SbomFile:
    name: str
    sha256: str


@dataclass(frozen=True)
class SbomComponent:
    """One component as the SBOM shows it (kind: a bundle component kind or "deb")."""

    kind: str
    name: str
    version: str | None
    files: tuple[SbomFile, ...] = ()
    licence: str | None = None
    source: str | None = None
    purl: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


_TYPES = {"agent": "library", "wheel": "library", "vllm": "library", "router": "library",
          "deb": "library",
          "model": "machine-learning-model", "image": "operating-system",
          "installer": "application", "docs": "file", "site": "data"}


def _hashes(files: tuple[SbomFile, ...]) -> list[dict[str, str]]:
    return [{"alg": "SHA-256", "content": f.sha256} for f in files[:1]]


def _component(c: SbomComponent, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _TYPES[c.kind], "bom-ref": f"{c.kind}-{index}-{c.name}",
                           "name": c.name}
    if c.version:
        out["version"] = c.version
    if c.purl:
        out["purl"] = c.purl
    if c.licence:
        out["licenses"] = [{"license": {"name": c.licence}}]
    if len(c.files) == 1:
        out["hashes"] = _hashes(c.files)
    elif c.files:
        out["components"] = [{"type": "file", "bom-ref": f"{c.kind}-{index}-file-{i}",
                              "name": f.name, "hashes": _hashes((f,))}
                             for i, f in enumerate(c.files)]
    if c.source:
        out["supplier"] = {"name": c.source}
    if c.kind == "model":
        out["modelCard"] = {"modelParameters": {"task": "text-generation"},
                            "properties": [{"name": "abhed:source", "value": c.source or ""}]}
    props = [{"name": f"abhed:{k}", "value": v} for k, v in sorted(c.properties.items())]
    if props:
        out["properties"] = out.get("properties", []) + props
    return out


def render_sbom(name: str, version: int, builder: str, components: list[SbomComponent],
                source_date_epoch: int | None) -> bytes:
    body: dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "component": {"type": "application", "bom-ref": "bundle", "name": name,
                          "version": str(version)},
            "tools": {"components": [{"type": "application", "name": builder}]},
        },
        "components": [_component(c, i) for i, c in enumerate(components)],
    }
    if source_date_epoch is not None:
        stamp = datetime.fromtimestamp(source_date_epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body["metadata"]["timestamp"] = stamp
    serial = uuid.uuid5(_NAMESPACE, canonical_json(body).decode())
    body["serialNumber"] = f"urn:uuid:{serial}"
    return canonical_json(body)


def summarize_sbom(doc: Any) -> dict[str, int]:
    """Counts of SBOM components by CycloneDX type (for ``inspect``)."""
    counts: dict[str, int] = {}
    comps = doc.get("components", []) if isinstance(doc, dict) else []
    for c in comps if isinstance(comps, list) else []:
        kind = str(c.get("type", "?")) if isinstance(c, dict) else "?"
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))
