"""Ed25519 keys and signatures in minisign's file formats.

Why minisign's formats: an operator, or an auditor, can check a manifest with
the stock ``minisign -V`` on any machine, without trusting our code.  We read
and write the formats ourselves (they are small and fully specified by the
minisign documentation) and use ``cryptography`` only for Ed25519 itself.

Public key file (two lines)::

    untrusted comment: minisign public key <KEYID>
    base64( "Ed" | key_id[8] | public_key[32] )

Signature file (four lines)::

    untrusted comment: <text>
    base64( "ED" | key_id[8] | ed25519(BLAKE2b-512(message))[64] )   # "Ed": ed25519(message)
    trusted comment: <text>
    base64( ed25519(signature[64] | trusted_comment_bytes)[64] )

A signature *set* is several such blocks, one after another, in one file:
``minisign -V`` checks the first block and ignores the rest, we check them all
(k-of-n thresholds).

Secret key file: minisign's layout, unencrypted (``kdf_alg`` zero, as
``minisign -G -W`` writes it), so ``minisign -S -s KEY`` can sign with ours
and we can sign with keys made by ``minisign -G -W``.  Password-encrypted
minisign keys are refused with a message saying how to use them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ._errors import FormatError, SignatureError

__all__ = ["PublicKey", "SecretKey", "Signature", "parse_signatures", "sign", "verify"]

_ALG_LEGACY = b"Ed"
_ALG_PREHASHED = b"ED"
_UNTRUSTED = "untrusted comment: "
_TRUSTED = "trusted comment: "
# minisign's own limits on comment lines; longer ones are refused before decoding.
_MAX_COMMENT = 1024
_MAX_TRUSTED_COMMENT = 8192
MAX_SIGNATURE_FILE_BYTES = 64 * 1024


def _b64(line: str, length: int, what: str) -> bytes:
    try:
        raw = base64.b64decode(line.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise FormatError(f"{what}: the base64 line is not valid base64") from None
    if len(raw) != length:
        raise FormatError(f"{what}: decodes to {len(raw)} bytes, expected {length}")
    return raw


def _comment(line: str, prefix: str, limit: int, what: str) -> str:
    if not line.startswith(prefix):
        raise FormatError(f"{what}: line should start with {prefix.strip()!r}")
    text = line[len(prefix):]
    if len(text.encode()) > limit:
        raise FormatError(f"{what}: comment longer than {limit} bytes")
    return text


def key_id_hex(key_id: bytes) -> str:
    """The key id as minisign prints it: the 8 bytes read little-endian, in hex."""
    return format(int.from_bytes(key_id, "little"), "016X")


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key with its 8-byte minisign key id."""

    key_id: bytes
    raw: bytes

    @property
    def id_hex(self) -> str:
        return key_id_hex(self.key_id)

    @classmethod
    def from_base64(cls, line: str) -> PublicKey:
        """The key as minisign's ``-P`` takes it (the second line of a .pub file)."""
        raw = _b64(line, 42, "public key")
        if raw[:2] != _ALG_LEGACY:
            raise FormatError(f"public key: algorithm {raw[:2]!r} is not Ed25519 ('Ed')")
        return cls(key_id=raw[2:10], raw=raw[10:])

    @classmethod
    def from_text(cls, text: str) -> PublicKey:
        """A minisign public key file; a bare base64 line is also accepted."""
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        if len(lines) == 1:
            return cls.from_base64(lines[0])
        if len(lines) != 2:
            raise FormatError("public key file: expected 2 lines (untrusted comment, key)")
        _comment(lines[0], _UNTRUSTED, _MAX_COMMENT, "public key file")
        return cls.from_base64(lines[1])

    def to_base64(self) -> str:
        return base64.b64encode(_ALG_LEGACY + self.key_id + self.raw).decode()

    def to_text(self) -> str:
        return f"{_UNTRUSTED}minisign public key {self.id_hex}\n{self.to_base64()}\n"


_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@dataclass(frozen=True)
class SecretKey:
    """An Ed25519 signing key (its 32-byte seed) with its minisign key id."""

    key_id: bytes
    seed: bytes

    @classmethod
    def generate(cls) -> SecretKey:
        return cls(key_id=os.urandom(8), seed=os.urandom(32))

    def public_key(self) -> PublicKey:
        pk = Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes_raw()
        return PublicKey(key_id=self.key_id, raw=pk)

    def _sign_raw(self, data: bytes) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(data)

    def model_signing_key(self) -> ec.EllipticCurvePrivateKey:
        """The P-256 key that signs model directories, derived from this key's seed.

        OpenSSF Model Signing (the ``model-signing`` library) signs with ECDSA
        only (P-256/384/521, Sigstore's key types), not Ed25519; deriving the
        key (HKDF-SHA256, 48 bytes reduced modulo the group order, as FIPS
        186-5 A.2.1 makes a key from extra random bits) keeps one secret to
        hold offline and rotate: whoever holds this key holds that one.
        """
        okm = HKDF(algorithm=hashes.SHA256(), length=48, salt=b"abhed model signing",
                   info=b"P-256 v1").derive(self.seed)
        return ec.derive_private_key(int.from_bytes(okm, "big") % (_P256_ORDER - 1) + 1,
                                     ec.SECP256R1())

    @classmethod
    def from_text(cls, text: str) -> SecretKey:
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        if len(lines) != 2:
            raise FormatError("secret key file: expected 2 lines (untrusted comment, key)")
        _comment(lines[0], _UNTRUSTED, _MAX_COMMENT, "secret key file")
        raw = _b64(lines[1], 158, "secret key")
        sig_alg, kdf_alg, chk_alg = raw[0:2], raw[2:4], raw[4:6]
        if sig_alg != _ALG_LEGACY or chk_alg != b"B2":
            raise FormatError("secret key file: not a minisign Ed25519 key")
        if kdf_alg != b"\0\0":
            raise FormatError(
                "secret key file is password-encrypted; this signer reads unencrypted keys "
                "only: make one with `abhed bundle keygen`, or decrypt a copy on the offline "
                "signing host with `minisign -C -W -s KEY`")
        key_id, sk = raw[54:62], raw[62:126]
        key = cls(key_id=key_id, seed=sk[:32])
        if key.public_key().raw != sk[32:]:
            raise FormatError("secret key file: the embedded public key does not match the "
                              "seed; the file is damaged")
        return key

    def to_text(self) -> str:
        sk = self.seed + self.public_key().raw
        chk = hashlib.blake2b(_ALG_LEGACY + self.key_id + sk, digest_size=32).digest()
        raw = (_ALG_LEGACY + b"\0\0" + b"B2" + bytes(32) + bytes(8) + bytes(8)
               + self.key_id + sk + chk)
        return (f"{_UNTRUSTED}minisign secret key {self.public_key().id_hex} (unencrypted)\n"
                f"{base64.b64encode(raw).decode()}\n")

    def __repr__(self) -> str:  # never print the seed
        return f"SecretKey(key_id={key_id_hex(self.key_id)})"


@dataclass(frozen=True)
class Signature:
    """One minisign signature block."""

    algorithm: bytes
    key_id: bytes
    signature: bytes
    trusted_comment: str
    global_signature: bytes
    untrusted_comment: str = "signature from abhed"

    @property
    def key_id_hex(self) -> str:
        return key_id_hex(self.key_id)

    def to_text(self) -> str:
        line = base64.b64encode(self.algorithm + self.key_id + self.signature).decode()
        return (f"{_UNTRUSTED}{self.untrusted_comment}\n{line}\n"
                f"{_TRUSTED}{self.trusted_comment}\n"
                f"{base64.b64encode(self.global_signature).decode()}\n")


def parse_signatures(data: bytes) -> list[Signature]:
    """Parse one or more minisign signature blocks (four lines each)."""
    if len(data) > MAX_SIGNATURE_FILE_BYTES:
        raise FormatError(f"signature file is {len(data)} bytes; over the "
                          f"{MAX_SIGNATURE_FILE_BYTES}-byte cap")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError("signature file is not UTF-8 text") from None
    lines = [ln.rstrip("\r") for ln in text.split("\n")]
    while lines and lines[-1] == "":
        lines.pop()
    if not lines or len(lines) % 4:
        raise FormatError(f"signature file has {len(lines)} lines; expected 4 per signature "
                          "(untrusted comment, signature, trusted comment, global signature)")
    out: list[Signature] = []
    for i in range(0, len(lines), 4):
        what = f"signature {i // 4 + 1}"
        untrusted = _comment(lines[i], _UNTRUSTED, _MAX_COMMENT, what)
        raw = _b64(lines[i + 1], 74, what)
        if raw[:2] not in (_ALG_LEGACY, _ALG_PREHASHED):
            raise FormatError(f"{what}: algorithm {raw[:2]!r} is neither 'Ed' nor 'ED'")
        trusted = _comment(lines[i + 2], _TRUSTED, _MAX_TRUSTED_COMMENT, what)
        global_sig = _b64(lines[i + 3], 64, f"{what} global signature")
        out.append(Signature(algorithm=raw[:2], key_id=raw[2:10], signature=raw[10:],
                             trusted_comment=trusted, global_signature=global_sig,
                             untrusted_comment=untrusted))
    return out


def sign(message: bytes, key: SecretKey, trusted_comment: str, *,
         untrusted_comment: str = "signature from abhed", prehash: bool = True) -> Signature:
    """Sign ``message`` as ``minisign -S`` does (prehashed "ED" unless told otherwise)."""
    for text, limit in ((trusted_comment, _MAX_TRUSTED_COMMENT), (untrusted_comment, _MAX_COMMENT)):
        if "\n" in text or "\r" in text or len(text.encode()) > limit:
            raise FormatError("a signature comment must be one line within minisign's limits")
    algorithm = _ALG_PREHASHED if prehash else _ALG_LEGACY
    data = hashlib.blake2b(message).digest() if prehash else message
    sig = key._sign_raw(data)
    global_sig = key._sign_raw(sig + trusted_comment.encode())
    return Signature(algorithm=algorithm, key_id=key.key_id, signature=sig,
                     trusted_comment=trusted_comment, global_signature=global_sig,
                     untrusted_comment=untrusted_comment)


def verify(sig: Signature, message: bytes, key: PublicKey) -> None:
    """Check one signature block against ``key``; raise SignatureError naming the failure."""
    if sig.key_id != key.key_id:
        raise SignatureError(f"signature is by key {sig.key_id_hex}, not {key.id_hex}")
    pub = Ed25519PublicKey.from_public_bytes(key.raw)
    data = hashlib.blake2b(message).digest() if sig.algorithm == _ALG_PREHASHED else message
    try:
        pub.verify(sig.signature, data)
    except InvalidSignature:
        raise SignatureError(f"signature by key {key.id_hex} does not match the signed file: "
                             "the file was altered after signing") from None
    try:
        pub.verify(sig.global_signature, sig.signature + sig.trusted_comment.encode())
    except InvalidSignature:
        raise SignatureError(f"trusted comment of the signature by key {key.id_hex} was "
                             "altered after signing") from None
