"""``ca init|issue|revoke DIR``: the site's CA for the model service, on the operator's machine.

Each verb is idempotent and says whether it changed anything (exit 0 either way):
``init`` keeps a CA that is there, ``issue`` keeps a host's valid credential unless
``--rotate``, ``revoke`` of a revoked host changes nothing.  Every run is recorded in
``DIR/audit/`` (the installer's hash-chained audit log).  ``installer._site_ca`` says
where the CA lives and why.
"""

from __future__ import annotations

import argparse
import os

from .._errors import UsageError
from .._layout import lock_prefix
from .._site_ca import SiteCA
from .._ui import out


def run(args: argparse.Namespace) -> int:
    ca_dir = args.ca_dir.absolute()
    ca = SiteCA(ca_dir)
    if args.ca_verb != "init" and not ca.exists():
        raise UsageError(f"{ca_dir} holds no site CA; make it with `abhed-installer ca init "
                         f"{ca_dir} --site NAME` (on the operator's machine, never on a host)")
    with lock_prefix(ca_dir, create=args.ca_verb == "init"):
        if args.ca_verb == "init":
            made = ca.init(args.site, args.days)
            out(("made" if made else "kept") + f": the site CA in {ca_dir} (certificate "
                f"{ca.cert_path}, revocation list {ca.crl_path}); its key never leaves "
                "this machine")
        elif args.ca_verb == "issue":
            if not args.out.parent.is_dir():
                raise UsageError(f"{args.out.parent} is not a directory: name the credential "
                                 "file in one that exists")
            if args.out.exists() and not args.rotate:
                raise UsageError(f"{args.out} exists; name a new file, or pass --rotate to "
                                 "replace the host's credential")
            issued = ca.issue(args.host, args.role, dns=args.dns, ips=args.ip, days=args.days,
                              rotate=args.rotate)
            if issued.pem is None:
                out(f"unchanged: host {args.host} holds credential {issued.serial:x}, valid "
                    f"until {issued.not_after}; pass --rotate to replace it")
                return 0
            tmp = args.out.with_name(f".{args.out.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(issued.pem)
            os.replace(tmp, args.out)
            out(f"issued: host {args.host} ({args.role}), serial {issued.serial:x}, valid until "
                f"{issued.not_after}, written to {args.out} (0600: carry it to the host and run "
                "`abhed-installer credential install` there, then delete it)")
            if args.rotate:
                out(f"the host's earlier credential is revoked: copy {ca.crl_path} to every "
                    "model host (`abhed-installer credential crl`)")
        else:
            serials = ca.revoke(args.host)
            if not serials:
                out(f"unchanged: host {args.host} holds no unrevoked credential")
            else:
                out(f"revoked: host {args.host}, serial(s) "
                    f"{', '.join(f'{s:x}' for s in serials)}; copy {ca.crl_path} to every "
                    "model host (`abhed-installer credential crl`)")
    out(f"audit head: {ca.audit.verify().head}")
    return 0
