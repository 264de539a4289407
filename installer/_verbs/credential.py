"""``credential install FILE`` and ``credential crl FILE``: a host's site credential.

``install`` keeps the host's key and certificate in ``PREFIX/state/credential/host.pem``
(root, 0600: no engineer can read it) and the site CA in ``ca.pem`` beside it.  The
first credential pins the site's CA on this host; one from another CA is refused
afterwards, as is one that is expired or whose key is not its certificate's.  ``crl``
installs the CA's revocation list on a model host, refusing a list not signed by the
pinned CA or older than the installed one.  Both are recorded in the audit log.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path
from typing import Any

from foundation import FoundationError, read_regular

from .._audit import AuditLog
from .._errors import UsageError
from .._layout import Layout, atomic_write, lock_prefix
from .._services import vllm_key_path
from .._site_ca import check_credential, check_crl, host_paths, split_credential
from .._ui import out

_MAX = 1024 * 1024


def _read(path: Path, what: str) -> bytes:
    try:
        return read_regular(path, _MAX, what)
    except FoundationError as exc:
        raise UsageError(str(exc)) from None


def _old(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _vllm_key(layout: Layout, cert: Any) -> Path | None:
    """On a model host (a certificate that may serve), the key vLLM will demand, made once:
    only the front, as root, reads it (installer._services)."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return None
    path = vllm_key_path(layout)
    if ExtendedKeyUsageOID.SERVER_AUTH not in usages or path.exists():
        return None
    atomic_write(path, secrets.token_urlsafe(32).encode() + b"\n", 0o600)
    return path


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    audit = AuditLog(layout.audit_dir)
    paths = host_paths(layout)
    source = str(args.file.absolute())
    base = {"run": secrets.token_hex(6), "file": source}
    with lock_prefix(layout.prefix, create=False):
        data = _read(args.file, "credential file" if args.cred_verb == "install"
                     else "revocation list")
        pinned = _old(paths.ca)
        try:
            if args.cred_verb == "install":
                cred, ca_pem, key, host_cert, ca_cert = split_credential(data, source)
                host = check_credential(key, host_cert, ca_cert, pinned, source)
                if _old(paths.credential) == cred and pinned == ca_pem:
                    out(f"unchanged: this host already holds that credential ({host})")
                    return 0
                paths.dir.mkdir(parents=True, exist_ok=True, mode=0o755)
                if os.geteuid() != 0:
                    raise UsageError("run `credential install` as root: the host's key must "
                                     "be root's alone")
                atomic_write(paths.credential, cred, 0o600)
                os.chown(paths.credential, 0, 0)
                atomic_write(paths.ca, ca_pem, 0o644)
                made_key = _vllm_key(layout, host_cert)
                entry = audit.append("credential", "install", "ok", **base, host=host,
                                     vllm_key=str(made_key) if made_key else None,
                                     serial=f"{host_cert.serial_number:x}",
                                     not_after=host_cert.not_valid_after_utc.isoformat())
                out(f"installed: this host's site credential as {host} (serial "
                    f"{host_cert.serial_number:x}) in {paths.credential} (root only)")
            else:
                if pinned is None:
                    raise UsageError("this host holds no site credential yet, so it does not "
                                     "know the site's CA; run `abhed-installer credential "
                                     "install` first")
                number = check_crl(data, pinned, _old(paths.crl), source)
                if _old(paths.crl) == data:
                    out(f"unchanged: revocation list number {number} is installed already")
                    return 0
                paths.dir.mkdir(parents=True, exist_ok=True, mode=0o755)
                atomic_write(paths.crl, data, 0o644)
                entry = audit.append("credential", "crl", "ok", **base, crl_number=number)
                out(f"installed: revocation list number {number} in {paths.crl}; the model "
                    "front reads it from its next request")
        except UsageError as exc:
            audit.append("credential", args.cred_verb, "refused", **base, detail=str(exc)[:2000])
            raise
    out(f"audit head: {entry['hash']}")
    return 0
