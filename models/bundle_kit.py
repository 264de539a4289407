"""What ``abhed bundle`` asks of models, in plain data: ``bundle.ModelKit``'s one implementation.

``bundle`` stands beside ``models`` (both on ``foundation``), so it may not import
it: the frozen installer carries ``bundle`` and no model code.  Building a bundle
still needs models' knowledge (a family's preset, the catalog entry's rules, the
vLLM command, the OpenSSF model signature), so ``bundle`` declares what it needs
(``bundle.ModelKit``) and the door that builds (``abhed bundle``, in ``cli``) hands
it :data:`BUNDLE_KIT`.  Everything crosses as JSON-like data, paths and keys, so
neither package names the other's types; a refusal is a ``ValueError`` naming the
problem, which ``bundle`` places in its own error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from models._catalog import CatalogEntry, hash_weights
from models._errors import ModelsError
from models._presets import entry_from_preset
from models._probe_bar import ProbeBar
from models._scale import check_parallel_fit
from models._serve import ServeSettings, VllmServer
from models._signature import MODEL_SIGNATURE, MODEL_SIGNING_PUB, public_key_pem, sign_model

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

__all__ = ["BUNDLE_KIT", "BundleKit"]


class BundleKit:
    """Models' answers to a bundle build (see the module doc and ``bundle.ModelKit``)."""

    signature_file = MODEL_SIGNATURE
    public_key_file = MODEL_SIGNING_PUB

    def check_probe(self, probe: Mapping[str, Any]) -> None:
        """ValueError naming each field when ``probe`` is not a :class:`ProbeBar`."""
        try:
            ProbeBar.model_validate(probe)
        except ValidationError as exc:
            raise ValueError("; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(table)'}: {e['msg']}"
                for e in exc.errors())) from None

    def check_fit(self, *, tensor: int, pipeline: int, data: int, gpus_per_host: int | None,
                  hosts: int, backend: str | None) -> None:
        """:func:`check_parallel_fit`: ValueError when the sizes do not fit the GPUs."""
        check_parallel_fit(tensor=tensor, pipeline=pipeline, data=data,
                           gpus_per_host=gpus_per_host, hosts=hosts, backend=backend)

    def hash_weights(self, root: Path) -> dict[str, str]:
        """sha256 of every regular file under ``root``."""
        return hash_weights(root)

    def preset_entry(self, root: Path, family: str, **fields: Any) -> dict[str, Any]:
        """The catalog entry :func:`entry_from_preset` writes, as JSON data; ValueError
        for what it refuses."""
        try:
            return entry_from_preset(root, family, **fields).model_dump(mode="json")
        except ModelsError as exc:
            raise ValueError(str(exc)) from None

    def with_layout(self, entry: Mapping[str, Any], layout: Mapping[str, Any],
                    probe: Mapping[str, Any] | None) -> dict[str, Any]:
        """``entry`` with the parallel layout (and a probe bar) on it, validated as a
        catalog entry: ValueError naming what the declared GPUs cannot hold."""
        try:
            full = CatalogEntry.model_validate({**entry, **layout})
        except ValidationError as exc:
            raise ValueError("; ".join(str(e["msg"]).removeprefix("Value error, ")
                                       for e in exc.errors())) from None
        if probe is not None:
            full = full.model_copy(update={"probe": ProbeBar.model_validate(probe)})
        return full.model_dump(mode="json")

    def serve_command(self, entry: Mapping[str, Any], *, python: str, host: str,
                      port: int) -> list[str]:
        """The vLLM server's argv for ``entry`` (:meth:`VllmServer.command`)."""
        return VllmServer(CatalogEntry.model_validate(entry), log_path=Path(os.devnull),
                          python=python, settings=ServeSettings(host=host), port=port).command()

    def sign(self, root: Path, *, name: str, key: ec.EllipticCurvePrivateKey) -> bytes:
        """The OpenSSF model signature of ``root`` (:func:`sign_model`)."""
        return sign_model(root, name=name, key=key)

    def public_key_pem(self, key: ec.EllipticCurvePrivateKey) -> bytes:
        """The PEM the signature verifies with (:func:`public_key_pem`)."""
        return public_key_pem(key)


BUNDLE_KIT = BundleKit()
"""The one kit ``abhed bundle`` (and a test building a bundle with a model) hands ``bundle``."""
