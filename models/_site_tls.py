"""The site's TLS between a host's model relay and the model service front.

Each host holds one credential issued by the site's CA (``abhed-installer ca
issue``): a private key and a certificate whose subject common name is the
host's name, in one PEM file that only root reads.  The relay presents it as a
client certificate; a model host's front presents its own as the server
certificate.  Both sides trust the site's CA and nothing else (never the public
roots), so a certificate from another site's CA is refused in the handshake,
and an expired one too (OpenSSL checks validity).  The front then holds the
certificate's serial against the site's revocation list: an X.509 CRL that the
CA signs (``abhed-installer ca revoke``), checked here with ``cryptography``'s
signature verification, so a list not signed by the site's CA is not believed.

Python's ``ssl`` (OpenSSL) does the TLS; nothing here is cryptography of our own.
"""

from __future__ import annotations

import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models._errors import ServeError

__all__ = ["ATTRIBUTION_HEADERS", "ENGINEER_HEADER", "GATE_ENGINEER", "HOST_HEADER", "PeerIdentity",
           "Revocations", "client_context", "peer_identity", "server_context"]

# What the relay asserts (it alone: it strips any the caller sent) and the front trusts
# because only a relay holding a host credential can reach it.
ENGINEER_HEADER = "x-abhed-engineer"
HOST_HEADER = "x-abhed-host"
# What the agent asserts about itself (its session and request ids: models._request_log's
# SESSION_HEADER and REQUEST_HEADER) the relay passes through as sent.
ATTRIBUTION_HEADERS = frozenset({ENGINEER_HEADER, HOST_HEADER})
# The engineer a relay names when the installer's health gate asks (``--gate``): a name no
# engineer can be given (the relay and ``engineer enroll`` refuse it), so the front's
# record and the auditor's join tell the gate's requests from engineers' (docs/
# model-service.md, *The gate*).
GATE_ENGINEER = "_abhed-gate"

_MAX_PEM = 1024 * 1024


def _load(ctx: ssl.SSLContext, what: str, ca: Path, credential: Path) -> ssl.SSLContext:
    try:
        ctx.load_verify_locations(cafile=str(ca))
    except (OSError, ssl.SSLError) as exc:
        raise ServeError(f"{what}: the site CA {ca} cannot be used ({exc}); install the host's "
                         "credential with `abhed-installer credential install`",
                         reason="credential") from None
    try:
        ctx.load_cert_chain(str(credential))
    except (OSError, ssl.SSLError) as exc:
        raise ServeError(f"{what}: the host credential {credential} cannot be used ({exc}); "
                         "install one with `abhed-installer credential install` (as root)",
                         reason="credential") from None
    return ctx


def client_context(ca: Path, credential: Path) -> ssl.SSLContext:
    """The relay's side: trust only the site CA (hostname checked), present the host's key."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return _load(ctx, "model relay", ca, credential)


def server_context(ca: Path, credential: Path) -> ssl.SSLContext:
    """The front's side: a client certificate from the site CA is required."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    return _load(ctx, "model front", ca, credential)


@dataclass(frozen=True)
class PeerIdentity:
    host: str
    serial: int


def peer_identity(sock: ssl.SSLSocket) -> PeerIdentity | None:
    """The verified peer certificate's host name (subject CN) and serial, or None."""
    cert = sock.getpeercert()
    if not cert:
        return None
    host = None
    subject: Any = cert.get("subject", ())
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                host = str(value)
    serial = cert.get("serialNumber")
    if host is None or not isinstance(serial, str):
        return None
    return PeerIdentity(host=host, serial=int(serial, 16))


class Revocations:
    """The site's CRL, re-read whenever the file changes; fail closed when it cannot be read.

    A missing, unreadable or unsigned list answers every lookup with the reason,
    so the front refuses requests rather than serve a revoked host."""

    def __init__(self, crl: Path, ca: Path) -> None:
        self.crl = crl
        self.ca = ca
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._serials: frozenset[int] = frozenset()
        self._problem: str | None = "not read yet"
        self.refresh()

    def refresh(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        try:
            st = os.stat(self.crl)
        except OSError as exc:
            with self._lock:
                self._stamp, self._problem = None, f"the revocation list {self.crl} cannot " \
                    f"be read ({exc.strerror}); install it with `abhed-installer credential crl`"
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            if stamp == self._stamp:
                return
        problem: str | None = None
        serials: frozenset[int] = frozenset()
        try:
            if st.st_size > _MAX_PEM:
                raise ValueError(f"over {_MAX_PEM} bytes")
            crl = x509.load_pem_x509_crl(self.crl.read_bytes())
            ca = x509.load_pem_x509_certificate(self.ca.read_bytes())
            key = ca.public_key()
            if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey
                              | ed25519.Ed25519PublicKey):
                raise ValueError("the CA's key type is not supported")
            if crl.issuer != ca.subject or not crl.is_signature_valid(key):
                raise ValueError("it is not signed by this site's CA")
            serials = frozenset(r.serial_number for r in crl)
        except (OSError, ValueError) as exc:
            problem = (f"the revocation list {self.crl} is not usable ({exc}); install the "
                       "CA's current list with `abhed-installer credential crl`")
        with self._lock:
            self._stamp, self._serials, self._problem = stamp, serials, problem

    def check(self, serial: int) -> str | None:
        """None when ``serial`` may be served; else why not."""
        self.refresh()
        with self._lock:
            if self._problem is not None:
                return self._problem
            if serial in self._serials:
                return "revoked"
        return None
