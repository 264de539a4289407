"""Which keys a host trusts, how many must sign, and how that set changes.

Modelled on TUF's root role, without its clock: a ``TrustPolicy`` is a set
of pinned Ed25519 keys, a threshold k (k distinct trusted keys must sign) and
a monotonic version.  Keys change only through a *rotation statement*: a
JSON document naming the next key set, threshold and a higher version, signed
by k keys of the current policy (so the old keys vouch for the new ones) and
by the new threshold of the new keys (so nobody pins a key they cannot use).
Replaying an old statement fails because its version is not higher.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import FormatError, SignatureError
from ._manifest import canonical_json, strict_json
from ._minisign import PublicKey, SecretKey, Signature, parse_signatures, sign, verify

__all__ = ["TrustPolicy", "check_threshold", "make_rotation", "rotate_trust", "sign_set"]

ROTATION_FORMAT = "abhed-trust/1"
MAX_ROTATION_BYTES = 64 * 1024


@dataclass(frozen=True)
class TrustPolicy:
    """Pinned keys, the number of them that must sign, and the policy's version."""

    keys: tuple[PublicKey, ...]
    threshold: int = 1
    version: int = 1

    def __post_init__(self) -> None:
        ids = [k.key_id for k in self.keys]
        if not ids:
            raise SignatureError("no trusted keys given: pass the bundle publisher's public "
                                 "key (--trust FILE.pub)")
        if len(set(ids)) != len(ids):
            raise SignatureError("the same key id is pinned twice; pin each key once")
        if not 1 <= self.threshold <= len(ids):
            raise SignatureError(f"threshold {self.threshold} must be between 1 and the "
                                 f"number of trusted keys ({len(ids)})")

    def key(self, key_id: bytes) -> PublicKey | None:
        for k in self.keys:
            if k.key_id == key_id:
                return k
        return None


def check_threshold(message: bytes, signatures: Sequence[Signature], policy: TrustPolicy,
                    what: str) -> tuple[str, ...]:
    """Key ids (hex) of the distinct trusted keys whose signatures verify.

    Raises SignatureError, listing every signature and why it did not count,
    when fewer than ``policy.threshold`` do.
    """
    good: list[str] = []
    notes: list[str] = []
    for sig in signatures:
        key = policy.key(sig.key_id)
        if key is None:
            notes.append(f"signature by key {sig.key_id_hex} is not by a trusted key")
            continue
        try:
            verify(sig, message, key)
        except SignatureError as exc:
            notes.append(str(exc))
            continue
        if key.id_hex not in good:
            good.append(key.id_hex)
    if len(good) < policy.threshold:
        trusted = ", ".join(k.id_hex for k in policy.keys)
        raise SignatureError(
            f"{what} is not trusted: {len(good)} valid signature(s) by trusted keys, "
            f"{policy.threshold} needed ({'; '.join(notes) or 'no signatures'}); trusted "
            f"keys: {trusted}. Get the bundle from its publisher again, or pin the right key")
    return tuple(good)


def sign_set(message: bytes, keys: Sequence[SecretKey], trusted_comment: str) -> bytes:
    """A signature file holding one minisign block per key (first block: first key)."""
    if not keys:
        raise SignatureError("no signing key given (--key FILE)")
    return b"".join(sign(message, k, trusted_comment).to_text().encode() for k in keys)


def make_rotation(current: TrustPolicy, new_keys: Sequence[PublicKey], new_threshold: int,
                  signers: Sequence[SecretKey]) -> tuple[bytes, bytes]:
    """A rotation statement and its signature file, moving ``current`` to the new keys.

    ``signers`` must hold enough current keys and enough new keys to meet both
    thresholds; ``rotate_trust`` checks that on the host.
    """
    nxt = TrustPolicy(keys=tuple(new_keys), threshold=new_threshold,
                      version=current.version + 1)
    statement = canonical_json({
        "format": ROTATION_FORMAT,
        "version": nxt.version,
        "threshold": nxt.threshold,
        "keys": [k.to_base64() for k in nxt.keys],
    })
    return statement, sign_set(statement, signers,
                               f"abhed trust rotation to version {nxt.version}")


def rotate_trust(current: TrustPolicy, statement: bytes, signatures: bytes) -> TrustPolicy:
    """The policy a valid rotation statement moves ``current`` to.

    Raises SignatureError unless the statement is signed by ``current``'s
    threshold of current keys and by its own threshold of its new keys, and
    carries a higher version than ``current``.
    """
    raw = strict_json(statement, "rotation statement", MAX_ROTATION_BYTES)
    if (not isinstance(raw, dict) or set(raw) != {"format", "version", "threshold", "keys"}
            or raw["format"] != ROTATION_FORMAT or not isinstance(raw["keys"], list)
            or type(raw["version"]) is not int or type(raw["threshold"]) is not int):
        raise FormatError(f"rotation statement is not an {ROTATION_FORMAT} document with "
                          "exactly format, version, threshold and keys")
    sigs = parse_signatures(signatures)
    check_threshold(statement, sigs, current, "rotation statement (by the current keys)")
    if raw["version"] <= current.version:
        raise SignatureError(f"rotation statement version {raw['version']} is not newer than "
                             f"the pinned trust version {current.version}: an old statement "
                             "replayed, refused")
    keys = tuple(PublicKey.from_base64(str(k)) for k in raw["keys"])
    nxt = TrustPolicy(keys=keys, threshold=raw["threshold"], version=raw["version"])
    check_threshold(statement, sigs, nxt, "rotation statement (by the new keys)")
    return nxt
