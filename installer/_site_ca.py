"""The site's CA for the model service: host credentials issued, rotated and revoked.

The CA lives in a directory on the operator's own machine (the one that signs
bundles), never on an agent or model host: whoever holds its key can mint a
host.  ``abhed-installer ca init DIR`` makes it once (later runs keep it)::

    DIR/ca.key        the CA's private key (0600; the directory is 0700)
    DIR/ca.pem        the CA certificate: what every host trusts
    DIR/crl.pem       the revocation list the CA signs: what model hosts check
    DIR/issued.json   every credential issued: host, role, serial, validity, revoked
    DIR/vllm.key      the site's vLLM key (0600), made at the first model host's credential
    DIR/audit/        the installer's hash-chained audit log of these verbs

A host credential is one PEM file: the host's private key, its certificate
(subject common name = the host's name; ``agent`` hosts may authenticate as
clients, ``model`` hosts also serve; both for ``all``), and the CA certificate.
It is written 0600 and carried to the host, where ``abhed-installer credential
install`` keeps it root-only.  A ``model`` (or ``all``) host's credential also carries the
site's vLLM key, one ``ABHED VLLM KEY`` PEM block: the bearer key each model host's vLLM
demands and only the front on the router's host sends.  With several model hosts behind
one router the front's key must open every host's vLLM, so it is the site's, not each
host's; it travels the way the host's private key does (0600 file, root-only on the
host), and the hosts' fronts are what engineers reach, never vLLM.  Keys are ECDSA P-256, made and signed by
``cryptography`` (pyca); TLS itself is OpenSSL's, through Python's ``ssl``.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation import under

from ._audit import AuditLog
from ._errors import UsageError
from ._layout import Layout, atomic_write, read_kept

__all__ = ["ROLES", "HostPaths", "Issued", "SiteCA", "check_credential", "check_crl",
           "host_paths", "key_digest", "model_key_of", "split_credential"]

ROLES = ("agent", "model", "all")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")
_INDEX_FORMAT = "abhed-site-ca/1"
_MAX_PEM = 1024 * 1024
_KEY_LABEL = "ABHED VLLM KEY"
_KEY_BLOCK = re.compile(rb"-----BEGIN " + _KEY_LABEL.encode() + rb"-----\r?\n(.*?)\r?\n-----END "
                        + _KEY_LABEL.encode() + rb"-----\r?\n?", re.S)
_KEY_TEXT = re.compile(r"[A-Za-z0-9_-]{32,256}")


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class HostPaths:
    """Where a host keeps its part of the model service's trust (under ``PREFIX/state``)."""

    dir: Path
    credential: Path  # the host's key and certificate: root, 0600
    ca: Path  # the site CA it trusts (pinned by the first credential)
    crl: Path  # a model host's copy of the CA's revocation list
    engineers: Path  # the enrolled engineers (models.service._enrolment's format)


def host_paths(layout: Layout) -> HostPaths:
    d = layout.state_dir / "credential"
    return HostPaths(dir=d, credential=d / "host.pem", ca=d / "ca.pem", crl=d / "crl.pem",
                     engineers=layout.state_dir / "engineers.json")


@dataclass(frozen=True)
class Issued:
    host: str
    serial: int
    changed: bool
    pem: bytes | None  # the credential, when a new one was made
    not_after: str


class SiteCA:
    """The CA directory: make or keep it, issue, rotate, revoke; each recorded in its audit log."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.audit = AuditLog(directory / "audit")

    # -- files (the module's docstring says what each holds) -------------------------------
    key_path = under("ca.key", root="dir")
    cert_path = under("ca.pem", root="dir")
    crl_path = under("crl.pem", root="dir")
    index_path = under("issued.json", root="dir")
    model_key_path = under("vllm.key", root="dir")

    def _model_key(self) -> tuple[str, bool]:
        """The site's vLLM key, made the first time a model host is issued one: (key, made)."""
        import secrets

        try:
            key = self.model_key_path.read_text("ascii").strip()
        except FileNotFoundError:
            key = secrets.token_urlsafe(32)
            atomic_write(self.model_key_path, key.encode() + b"\n", 0o600)
            return key, True
        except (OSError, UnicodeError) as exc:
            raise UsageError(f"{self.model_key_path}: {exc}; restore it from your backup") from None
        if not _KEY_TEXT.fullmatch(key):
            raise UsageError(f"{self.model_key_path} is damaged (not a key this CA made); "
                             "restore it from your backup")
        return key, False

    def exists(self) -> bool:
        return self.key_path.is_file() and self.cert_path.is_file()

    def _index(self) -> dict[str, Any]:
        raw = read_kept(self.index_path, _INDEX_FORMAT, what="CA index", error=UsageError,
                        hint="The CA's record of issued credentials was damaged; restore it "
                             "from your backup.")
        if raw is None:
            return {"format": _INDEX_FORMAT, "site": None, "crl_number": 0, "issued": []}
        return raw

    def _save_index(self, index: dict[str, Any]) -> None:
        atomic_write(self.index_path, (json.dumps(index, indent=2, sort_keys=True) + "\n")
                     .encode(), 0o600)

    def _load(self) -> tuple[Any, Any]:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        if not self.exists():
            raise UsageError(f"{self.dir} holds no site CA; make it with `abhed-installer ca "
                             f"init {self.dir} --site NAME`")
        key = serialization.load_pem_private_key(self.key_path.read_bytes(), password=None)
        cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
        return key, cert

    # -- verbs ---------------------------------------------------------------------------
    def init(self, site: str, days: int) -> bool:
        """Make the CA; False (and nothing touched) when it is there already."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        if self.exists():
            _key, cert = self._load()
            self.audit.append("ca", "init", "unchanged", fingerprint=_fingerprint(cert))
            return False
        if not _HOST.fullmatch(site):
            raise UsageError(f"site name {site!r}: use letters, digits, dots and dashes")
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Abhed site CA {site}"),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, site)])
        now = _utcnow()
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                             key_encipherment=False, data_encipherment=False,
                                             key_agreement=False, key_cert_sign=True,
                                             crl_sign=True, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .sign(key, hashes.SHA256()))
        atomic_write(self.key_path, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()), 0o600)
        atomic_write(self.cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        self._save_index({"format": _INDEX_FORMAT, "site": site, "crl_number": 0, "issued": []})
        self._write_crl()
        self.audit.append("ca", "init", "ok", site=site, fingerprint=_fingerprint(cert),
                          days=days)
        return True

    def issue(self, host: str, role: str, *, dns: list[str], ips: list[str], days: int,
              rotate: bool = False, valid_from: datetime.datetime | None = None) -> Issued:
        """A credential for ``host``; with one valid already, nothing changes unless ``rotate``
        (then the old one is revoked in the same step).  ``valid_from`` is for tests of an
        expired credential."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        if not _HOST.fullmatch(host):
            raise UsageError(f"host name {host!r}: use letters, digits, dots and dashes")
        if role not in ROLES:
            raise UsageError(f"role {role!r}: use one of {', '.join(ROLES)}")
        addresses = []
        for ip in ips:
            try:
                addresses.append(ipaddress.ip_address(ip))
            except ValueError:
                raise UsageError(f"--ip {ip!r} is not an IP address") from None
        for d in dns:
            if not _HOST.fullmatch(d):
                raise UsageError(f"--dns {d!r} is not a DNS name")
        ca_key, ca_cert = self._load()
        index = self._index()
        now = _utcnow()
        live = [e for e in index["issued"] if e["host"] == host and not e.get("revoked")
                and datetime.datetime.fromisoformat(e["not_after"]) > now]
        if live and not rotate:
            e = live[-1]
            self.audit.append("ca", "issue", "unchanged", host=host, serial=f"{e['serial']:x}")
            return Issued(host, int(e["serial"]), False, None, str(e["not_after"]))
        start = valid_from or now - datetime.timedelta(minutes=5)
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if role in ("model", "all"):
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        sans: list[x509.GeneralName] = [x509.DNSName(host), *(x509.DNSName(d) for d in dns),
                                        *(x509.IPAddress(a) for a in addresses)]
        serial = x509.random_serial_number()
        not_after = start + datetime.timedelta(days=days)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
                .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(serial)
                .not_valid_before(start).not_valid_after(not_after)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .sign(ca_key, hashes.SHA256()))
        pem = (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
               + cert.public_bytes(serialization.Encoding.PEM)
               + ca_cert.public_bytes(serialization.Encoding.PEM))
        model_key: dict[str, Any] = {}
        if role in ("model", "all"):
            shared, made = self._model_key()
            # Its body is base64 like every PEM block's: TLS libraries reading the file for
            # the key and certificates skip a block they do not know, but not a bad one.
            body = base64.b64encode(shared.encode()).decode()
            pem += f"-----BEGIN {_KEY_LABEL}-----\n{body}\n-----END {_KEY_LABEL}-----\n".encode()
            model_key = {"vllm_key": "made" if made else "shared",
                         "vllm_key_sha256": key_digest(shared)}
        for e in live:
            e["revoked"] = now.isoformat(timespec="seconds")
            e["revoked_reason"] = "superseded"
        index["issued"].append({"host": host, "role": role, "serial": serial,
                                "not_after": not_after.isoformat(timespec="seconds"),
                                "issued": now.isoformat(timespec="seconds")})
        self._save_index(index)
        if live:
            self._write_crl()
        self.audit.append("ca", "rotate" if live else "issue", "ok", host=host, role=role,
                          serial=f"{serial:x}", not_after=not_after.isoformat(timespec="seconds"),
                          superseded=[f"{e['serial']:x}" for e in live] or None, **model_key)
        return Issued(host, serial, True, pem, not_after.isoformat(timespec="seconds"))

    def revoke(self, host: str) -> list[int]:
        """Revoke every unrevoked credential of ``host``; the serials revoked (none: unchanged)."""
        index = self._index()
        now = _utcnow().isoformat(timespec="seconds")
        hit = [e for e in index["issued"] if e["host"] == host and not e.get("revoked")]
        if not hit and not any(e["host"] == host for e in index["issued"]):
            raise UsageError(f"no credential was ever issued to host {host!r} by this CA")
        for e in hit:
            e["revoked"], e["revoked_reason"] = now, "revoked by the operator"
        if hit:
            self._save_index(index)
            self._write_crl()
        self.audit.append("ca", "revoke", "ok" if hit else "unchanged", host=host,
                          serials=[f"{e['serial']:x}" for e in hit] or None)
        return [int(e["serial"]) for e in hit]

    def _write_crl(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        ca_key, ca_cert = self._load()
        index = self._index()
        index["crl_number"] = int(index.get("crl_number", 0)) + 1
        now = _utcnow()
        builder = (x509.CertificateRevocationListBuilder().issuer_name(ca_cert.subject)
                   .last_update(now)
                   # The list holds until the operator replaces it: the front reads the newest
                   # one it was given, and a list that lapsed would stop the whole site.
                   .next_update(ca_cert.not_valid_after_utc)
                   .add_extension(x509.CRLNumber(index["crl_number"]), critical=False))
        for e in index["issued"]:
            if e.get("revoked"):
                builder = builder.add_revoked_certificate(
                    x509.RevokedCertificateBuilder().serial_number(int(e["serial"]))
                    .revocation_date(datetime.datetime.fromisoformat(e["revoked"])).build())
        crl = builder.sign(ca_key, hashes.SHA256())
        self._save_index(index)
        atomic_write(self.crl_path, crl.public_bytes(serialization.Encoding.PEM), 0o644)


def _fingerprint(cert: Any) -> str:
    from cryptography.hazmat.primitives import hashes

    return str(cert.fingerprint(hashes.SHA256()).hex())


def key_digest(key: str) -> str:
    """What the audit logs record of the vLLM key: enough to tell two apart, never the key."""
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()[:16]


def model_key_of(data: bytes, source: str) -> str | None:
    """The site's vLLM key a model host's credential file carries (None in an agent host's,
    or one issued before the key was shared); UsageError when the block is malformed."""
    blocks = _KEY_BLOCK.findall(data)
    if not blocks:
        if f"BEGIN {_KEY_LABEL}".encode() in data:
            raise UsageError(f"{source}: its {_KEY_LABEL} block is cut or malformed; issue "
                             "the credential again (`abhed-installer ca issue ... --rotate`)")
        return None
    try:
        key = base64.b64decode(bytes(blocks[0]).strip(), validate=True).decode("ascii")
    except (ValueError, UnicodeError):
        key = ""
    if len(blocks) > 1 or not _KEY_TEXT.fullmatch(key):
        raise UsageError(f"{source}: its {_KEY_LABEL} block is not one key from `abhed-installer "
                         "ca issue`; issue the credential again")
    return key


def split_credential(data: bytes, source: str) -> tuple[bytes, bytes, Any, Any, Any]:
    """(key + host certificate PEM, CA PEM, key, host cert, CA cert) of a credential file
    (its vLLM key, if any, is :func:`model_key_of`'s)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if len(data) > _MAX_PEM:
        raise UsageError(f"{source} is over {_MAX_PEM} bytes: not a host credential")
    data = _KEY_BLOCK.sub(b"", data)
    try:
        key = serialization.load_pem_private_key(data, password=None)
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise UsageError(f"{source} is not a host credential from `abhed-installer ca issue` "
                         f"({exc})") from None
    if len(certs) != 2:
        raise UsageError(f"{source} holds {len(certs)} certificates; a host credential holds "
                         "two (the host's, then the site CA's)")
    host, ca = certs
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return (key_pem + host.public_bytes(serialization.Encoding.PEM),
            ca.public_bytes(serialization.Encoding.PEM), key, host, ca)


def check_credential(key: Any, host: Any, ca: Any, pinned_ca: bytes | None,
                     source: str) -> str:
    """The host name of a credential, after it is checked: signed by its CA, the CA the
    host already trusts (if any), within its validity, the key its certificate's."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    if pinned_ca is not None:
        pinned = x509.load_pem_x509_certificate(pinned_ca)
        if pinned.public_bytes(serialization.Encoding.DER) != ca.public_bytes(
                serialization.Encoding.DER):
            raise UsageError(f"{source} is from another CA ({ca.subject.rfc4514_string()}) than "
                             f"the site CA this host trusts ({pinned.subject.rfc4514_string()}): "
                             "refused; nothing changed. Ask your site's operator for this "
                             "host's credential")
    try:
        host.verify_directly_issued_by(ca)
    except Exception as exc:  # InvalidSignature, ValueError, TypeError: all a refusal
        raise UsageError(f"{source}: the host certificate is not signed by the CA in it "
                         f"({type(exc).__name__})") from None
    now = _utcnow()
    if not host.not_valid_before_utc <= now <= host.not_valid_after_utc:
        raise UsageError(f"{source} is valid {host.not_valid_before_utc:%Y-%m-%d %H:%M} to "
                         f"{host.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now: refused; "
                         "ask for a new one (`abhed-installer ca issue --rotate`)")
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != host.public_key().public_bytes(*spki):
        raise UsageError(f"{source}: the private key is not the certificate's")
    names = host.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        raise UsageError(f"{source}: the certificate names no host")
    return str(names[0].value)


def check_crl(data: bytes, ca_pem: bytes, current: bytes | None, source: str) -> int:
    """The CRL number of a revocation list signed by the host's CA, no older than the one
    installed (an older list could un-revoke a host)."""
    from cryptography import x509

    try:
        crl = x509.load_pem_x509_crl(data)
    except ValueError as exc:
        raise UsageError(f"{source} is not a revocation list ({exc})") from None
    ca = x509.load_pem_x509_certificate(ca_pem)
    key = ca.public_key()
    if crl.issuer != ca.subject or not crl.is_signature_valid(key):  # type: ignore[arg-type]
        raise UsageError(f"{source} is not signed by the site CA this host trusts: refused; "
                         "nothing changed")
    number = _crl_number(crl)
    if current is not None:
        old = _crl_number(x509.load_pem_x509_crl(current))
        if number < old:
            raise UsageError(f"{source} is revocation list number {number}, older than the "
                             f"installed number {old}: refused (it could bring a revoked host "
                             "back); copy the CA's current crl.pem")
    return number


def _crl_number(crl: Any) -> int:
    from cryptography import x509

    try:
        return int(crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number)
    except x509.ExtensionNotFound:
        return 0
