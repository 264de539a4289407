"""What building a bundle with a model asks of the model code: :class:`ModelKit`.

``bundle`` may not import ``models`` (docs/architecture.md: they stand side by side
on ``foundation``, and the frozen installer carries ``bundle`` without any model
code), yet ``abhed bundle gather`` writes each model's catalog entry from its
family's preset and its vLLM command, and ``abhed bundle build`` signs each model
directory the OpenSSF way.  So the bundle names what it needs here, in plain data,
and the caller hands it the implementation: ``abhed bundle`` passes
``models.bundle_kit.BUNDLE_KIT``, as it passes the agent's schema (``SettingsCheck``).  A
spec with a model is refused without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import SpecError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

__all__ = ["ModelKit", "require_kit"]


class ModelKit(Protocol):
    """The model knowledge a build uses; a refusal is a ``ValueError`` naming the problem."""

    signature_file: str
    """The signature's file name in a model directory (``model.sig``)."""
    public_key_file: str
    """The name of the public key beside it (``model-signing.pub``)."""

    def check_probe(self, probe: Mapping[str, Any]) -> None:
        """Refuse a ``[model.probe]`` table that is not a capability probe's bar."""

    def check_fit(self, *, tensor: int, pipeline: int, data: int, gpus_per_host: int | None,
                  hosts: int, backend: str | None) -> None:
        """Refuse parallel sizes the declared GPUs cannot hold."""

    def hash_weights(self, root: Path) -> dict[str, str]:
        """Relative path -> sha256 of every regular file under ``root``."""

    def preset_entry(self, root: Path, family: str, **fields: Any) -> dict[str, Any]:
        """The model's catalog entry from its family's preset (JSON data)."""

    def with_layout(self, entry: Mapping[str, Any], layout: Mapping[str, Any],
                    probe: Mapping[str, Any] | None) -> dict[str, Any]:
        """``entry`` with the parallel layout and probe bar on it, validated."""

    def serve_command(self, entry: Mapping[str, Any], *, python: str, host: str,
                      port: int) -> list[str]:
        """The model server's argv for ``entry``."""

    def sign(self, root: Path, *, name: str, key: ec.EllipticCurvePrivateKey) -> bytes:
        """The model signature's bytes for the directory ``root``."""

    def public_key_pem(self, key: ec.EllipticCurvePrivateKey) -> bytes:
        """The PEM public key the signature verifies with."""


def require_kit(kit: ModelKit | None, where: str) -> ModelKit:
    """``kit``, or a SpecError saying that a model cannot be bundled without one."""
    if kit is None:
        raise SpecError(f"{where} names a model, which a bundle carries only with its catalog "
                        "entry and signature: use `abhed bundle gather` or `abhed bundle "
                        "build`, or pass model_kit=models.bundle_kit.BUNDLE_KIT")
    return kit
