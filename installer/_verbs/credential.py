"""``credential install FILE`` and ``credential crl FILE``: a host's site credential.

``install`` keeps the host's key and certificate in ``PREFIX/state/credential/host.pem``
(root, 0600: no engineer can read it) and the site CA in ``ca.pem`` beside it; on a model
host, the site's vLLM key the credential carries in ``vllm.key`` (root, 0600), which vLLM
demands and the front sends (one key for every model host behind a router).  The
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

from foundation import read_regular, reraised_as

from .._audit import AuditLog
from .._errors import UsageError
from .._layout import Layout, atomic_write, lock_prefix
from .._services import vllm_key_path
from .._site_ca import (
    check_credential,
    check_crl,
    host_paths,
    key_digest,
    model_key_of,
    split_credential,
)
from .._ui import out

_MAX = 1024 * 1024


def _read(path: Path, what: str) -> bytes:
    with reraised_as(UsageError):
        return read_regular(path, _MAX, what)


def _old(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _serves(cert: Any) -> bool:
    """A model host's certificate: one that may serve TLS."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return ExtendedKeyUsageOID.SERVER_AUTH in usages


def _vllm_key(layout: Layout, cert: Any, shared: str | None) -> str | None:
    """On a model host, the key vLLM will demand (only the front, as root, reads it):
    the site's, from the credential (``shared``), replacing another; from a credential
    issued before the site's key, one made here once, which serves a host alone but not
    behind a router.  What changed ("installed", "replaced", "made"), or None."""
    if not _serves(cert):
        return None
    path = vllm_key_path(layout)
    old = _old(path)
    if shared is None:
        if old is not None:
            return None
        atomic_write(path, secrets.token_urlsafe(32).encode() + b"\n", 0o600)
        return "made"
    if old is not None and old.strip() == shared.encode():
        return None
    atomic_write(path, shared.encode() + b"\n", 0o600)
    os.chown(path, 0, 0)
    return "replaced" if old is not None else "installed"


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
                shared = model_key_of(data, source)  # first: a cut block is named as such
                cred, ca_pem, key, host_cert, ca_cert = split_credential(data, source)
                host = check_credential(key, host_cert, ca_cert, pinned, source)
                held = _old(vllm_key_path(layout))
                if (_old(paths.credential) == cred and pinned == ca_pem
                        and (shared is None or not _serves(host_cert)
                             or (held or b"").strip() == shared.encode())):
                    out(f"unchanged: this host already holds that credential ({host})")
                    return 0
                paths.dir.mkdir(parents=True, exist_ok=True, mode=0o755)
                if os.geteuid() != 0:
                    raise UsageError("run `credential install` as root: the host's key must "
                                     "be root's alone")
                atomic_write(paths.credential, cred, 0o600)
                os.chown(paths.credential, 0, 0)
                atomic_write(paths.ca, ca_pem, 0o644)
                keyed = _vllm_key(layout, host_cert, shared)
                entry = audit.append("credential", "install", "ok", **base, host=host,
                                     vllm_key=keyed, vllm_key_sha256=(
                                         key_digest(shared) if keyed and shared else None),
                                     serial=f"{host_cert.serial_number:x}",
                                     not_after=host_cert.not_valid_after_utc.isoformat())
                out(f"installed: this host's site credential as {host} (serial "
                    f"{host_cert.serial_number:x}) in {paths.credential} (root only)")
                if keyed in ("installed", "replaced"):
                    out(f"{keyed}: the site's vLLM key in {vllm_key_path(layout)} (root only); "
                        "vLLM and the front use it from their next start")
                elif keyed == "made" and _serves(host_cert):
                    out(f"made: a vLLM key of this host's own in {vllm_key_path(layout)}; "
                        "behind a router every model host needs the site's: issue this "
                        "host's credential again (`ca issue ... --rotate`) and install it")
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
