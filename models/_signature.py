"""Model weights signed the OpenSSF Model Signing way, so any verifier can check them.

A model directory in a bundle carries ``model.sig``, a Sigstore bundle (a
DSSE envelope over an in-toto statement listing every file and its sha256)
made by the ``model-signing`` library, and ``model-signing.pub``, the PEM
public key it verifies with.  Both files are left out of what is signed
(the statement records them as ignored paths), so the standard command
checks an installed model with nothing of Abhed's::

    model_signing verify key --signature DIR/model.sig --public_key DIR/model-signing.pub DIR

Signing is key based, never keyless: keyless signing needs Sigstore's
servers (Fulcio, Rekor), which an air-gapped site cannot reach, while a key
verifies offline.  The library signs with ECDSA (P-256, P-384, P-521 only:
Sigstore's key types), not with the bundle's Ed25519 key; ``bundle`` derives
a P-256 key from that Ed25519 key (docs/bundle.md, "Model signatures").
The signature is made deterministic (RFC 6979) so that a bundle build stays
byte-reproducible; the library's own signer draws a random nonce.

This module is the one place that knows the file names, what is signed and
how an identity is named: ``abhed bundle build`` signs through it,
``abhed serve`` verifies through it, and a session's start names the
identity it reads here.  ``model_signing`` is imported only when signing or
verifying (it pulls in sigstore).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # cryptography loads when a key is used, not when `models` is imported
    from cryptography.hazmat.primitives.asymmetric import ec

from models._errors import ServeError

__all__ = ["MODEL_SIGNATURE", "MODEL_SIGNING_PUB", "SIGNED_EXCLUDES", "public_key_pem",
           "sign_model", "signature_identity", "signed_digests", "verify_model"]

MODEL_SIGNATURE = "model.sig"
MODEL_SIGNING_PUB = "model-signing.pub"
SIGNED_EXCLUDES = (MODEL_SIGNATURE, MODEL_SIGNING_PUB)
_MAX_SIGNATURE = 64 << 20  # a statement lists every file: large for sharded weights, never this


def public_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The PEM (SubjectPublicKeyInfo) that ``model_signing verify key --public_key`` reads."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def _hashing_config(model_dir: Path) -> Any:
    from model_signing import hashing

    # The library's defaults (sha256 per file, git files ignored) so that the plain
    # `model_signing verify` command hashes the directory the same way.
    return hashing.Config().set_ignored_paths(  # type: ignore[no-untyped-call]
        paths=list(SIGNED_EXCLUDES), ignore_git_paths=True)


def sign_model(model_dir: Path, *, name: str, key: ec.EllipticCurvePrivateKey) -> bytes:
    """The ``model.sig`` bytes for ``model_dir``, signed with ``key`` (deterministically).

    ``name`` is the statement's subject name (the model's name in the bundle,
    not the directory's name on the build host, which would make the bytes
    depend on where the weights were downloaded); verifiers treat it as a label.
    """
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from google.protobuf import json_format  # type: ignore[import-untyped]
    from model_signing._signing import sign_sigstore_pb, signing
    from sigstore_models import intoto as intoto_pb
    from sigstore_models.bundle import v1 as bundle_pb
    from sigstore_models.common import v1 as common_pb

    if not isinstance(key.curve, ec.SECP256R1):
        raise ServeError(f"model signing key must be P-256, not {key.curve.name}",
                         reason="signature_key")
    hashed = _hashing_config(model_dir).hash(model_dir)
    renamed = copy.copy(hashed)
    renamed._name = name  # the subject's label only: manifests compare by their files
    serialization = renamed._serialization_type
    # The library lists ignored paths in a set's order, which changes with the process's hash
    # seed: sorted, the statement (and so the signature) is the same on every build.
    serialization._ignore_paths = sorted(getattr(serialization, "_ignore_paths", []))
    payload = signing.Payload(renamed)
    # Canonical JSON (sorted keys): the library's text follows map order, which varies.
    raw_payload = json.dumps(json.loads(json_format.MessageToJson(payload.statement.pb)),
                             sort_keys=True, indent=2).encode("utf-8")
    sig = key.sign(sign_sigstore_pb.pae(raw_payload),
                   ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    pem = public_key_pem(key)
    bundle = bundle_pb.Bundle(
        media_type=sign_sigstore_pb._BUNDLE_MEDIA_TYPE,  # type: ignore[arg-type]
        verification_material=bundle_pb.VerificationMaterial(
            public_key=common_pb.PublicKeyIdentifier(hint=hashlib.sha256(pem).hexdigest()),
            tlog_entries=[]),
        dsse_envelope=intoto_pb.Envelope(
            payload=base64.b64encode(raw_payload), payload_type=signing._IN_TOTO_JSON_PAYLOAD_TYPE,
            signatures=[intoto_pb.Signature(sig=base64.b64encode(sig), keyid="")]))
    return bundle.to_json().encode("utf-8")


def verify_model(model_dir: Path) -> dict[str, str]:
    """Check ``model_dir`` against its ``model.sig`` with its ``model-signing.pub``.

    Returns the identity (:func:`signature_identity`); raises :class:`ServeError`
    (reason ``signature_invalid``) naming what does not match.
    """
    sig, pub = model_dir / MODEL_SIGNATURE, model_dir / MODEL_SIGNING_PUB
    for path in (sig, pub):
        if not path.is_file():
            raise ServeError(f"{path} is missing: the model's signature cannot be checked. "
                             "Reinstall the model from its verified bundle.",
                             reason="signature_missing")
    from model_signing import verifying

    try:
        verifying.Config().use_elliptic_key_verifier(  # type: ignore[no-untyped-call]
            public_key=pub).set_hashing_config(
            _hashing_config(model_dir)).verify(model_dir, sig)
    except Exception as exc:  # the library raises ValueError, KeyError, InvalidSignature ...
        raise ServeError(
            f"the model in {model_dir} does not match its signature ({MODEL_SIGNATURE}, key "
            f"{MODEL_SIGNING_PUB}): {_why(exc)}. Do not serve it; reinstall the model from its "
            "verified bundle.", reason="signature_invalid") from None
    identity = signature_identity(model_dir)
    assert identity is not None
    return identity


def _why(exc: Exception) -> str:
    """The library's reason in a sentence: which files differ, else its own words (cut)."""
    text = str(exc)
    altered = re.findall(r"Hash mismatch for \\?'([^'\\]+)", text)
    extra = re.findall(r"Extra files found in model '[^']*': ([^\]\"]+)", text)
    missing = re.findall(r"Missing files in model '[^']*': ([^\]\"]+)", text)
    parts = ([f"altered: {', '.join(altered)}"] if altered else []) + \
        [f"not signed: {e}" for e in extra] + [f"missing: {m}" for m in missing]
    if parts:
        return "; ".join(parts)
    if type(exc).__name__ == "InvalidSignature":
        return "the signature does not verify with this key (signed by another key, or altered)"
    return f"{type(exc).__name__}: {text[:300]}"


def signed_digests(model_dir: Path) -> dict[str, str]:
    """Each signed file's sha256 as the statement in ``model.sig`` lists it (not verified)."""
    raw = (model_dir / MODEL_SIGNATURE).read_bytes()[: _MAX_SIGNATURE + 1]
    try:
        statement = json.loads(base64.b64decode(json.loads(raw)["dsseEnvelope"]["payload"]))
        return {str(r["name"]): str(r["digest"]) for r in statement["predicate"]["resources"]
                if r.get("algorithm") == "sha256"}
    except (ValueError, KeyError, TypeError) as exc:
        raise ServeError(f"{model_dir / MODEL_SIGNATURE} is not an OpenSSF model signature "
                         f"({type(exc).__name__}); reinstall the model from its verified bundle.",
                         reason="signature_invalid") from None


def signature_identity(model_dir: Path) -> dict[str, str] | None:
    """Who signed the model and what: read from the files, not verified (None: unsigned).

    ``key_sha256`` is sha256 of the PEM public key (the library's key hint, and
    what ``abhed bundle keygen`` prints), ``subject_sha256`` the statement's
    digest over every file's digest, ``signature_sha256`` the file's own digest.
    """
    sig, pub = model_dir / MODEL_SIGNATURE, model_dir / MODEL_SIGNING_PUB
    try:
        raw = sig.read_bytes()[: _MAX_SIGNATURE + 1]
        pem = pub.read_bytes()[: 1 << 16]
    except OSError:
        return None
    identity = {"format": "openssf-model-signing/v1.0 (key)",
                "key_sha256": hashlib.sha256(pem).hexdigest(),
                "signature_sha256": hashlib.sha256(raw).hexdigest(), "subject_sha256": "unreadable"}
    try:
        envelope = json.loads(raw)["dsseEnvelope"]
        statement = json.loads(base64.b64decode(envelope["payload"]))
        identity["subject_sha256"] = str(statement["subject"][0]["digest"]["sha256"])
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    return identity
