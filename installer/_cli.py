"""``abhed-installer``: the argument parser and the one place errors become exit codes.

Each verb's work lives in ``installer/_verbs/<verb>.py`` and is imported only
when that verb runs, so ``--help`` and ``status`` start without pydantic,
cryptography or zstandard.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from ._errors import ExitCode, InstallerError, Interrupted

__all__ = ["build_parser", "main"]

_EPILOG = """exit codes: 0 done, 1 failed, 2 usage, 3 bundle refused, 4 preflight failed,
5 downgrade refused, 6 a step failed (nothing changed), 7 health gate failed (previous
release kept), 8 check found differences, 9 audit chain broken, 10 prefix busy,
11 not installed, 130/143 interrupted (host restored).  Guide: docs/installer.md"""


def _prefix(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefix", type=Path, default=None,
                   help="install root (default: $ABHED_PREFIX or /opt/abhed)")


def _trust(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust", type=Path, action="append", default=[], metavar="PUB",
                   help="publisher public key (minisign .pub); needed once, then pinned")
    p.add_argument("--threshold", type=int, default=None,
                   help="how many --trust keys must sign (default 1)")


def _reason(text: str) -> str:
    if not text.strip() or len(text) > 2000 or any(ord(c) < 32 for c in text):
        raise argparse.ArgumentTypeError("give a reason of 1-2000 printable characters (it goes "
                                         "into the audit log)")
    return text.strip()


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if not 1 <= days <= 36500:
        raise argparse.ArgumentTypeError("give a whole number of days from 1 to 36500")
    return days


def _links(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host-link", type=Path, default=None, metavar="PATH",
                   help="where the host link to PREFIX/current/site goes (every abhed on the "
                   "host reads /etc/abhed/site); default: /etc/abhed/site for /opt/abhed, "
                   "none for another prefix")
    p.add_argument("--bin-link", type=Path, default=None, metavar="PATH",
                   help="where engineers' PATH finds abhed (a link to PREFIX/bin/abhed); "
                   "default: /usr/local/bin/abhed for /opt/abhed, none for another prefix")


def _drop(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drop-site-layer", action="store_true",
                   help="switch from a release with site settings to one without: engineers' "
                   "abhed then has no site layer (recorded)")


def _role(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", default=None, metavar="ROLE",
                   help="what this host is: agent (engineers work here: no weights, no vLLM), "
                   "model (serves the model: no microVM image), all (both). Default: the "
                   "host's role once installed, else the bundle's only role")
    p.add_argument("--switch-role", action="store_true",
                   help="with --role: let an upgrade (or rollback) change this host's role "
                   "(recorded)")


def _accept(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accept-probe-failure", metavar="REASON", type=_reason, default=None,
                   help="switch even if the model fails its capability probe; REASON and the "
                   "probe's findings go into the audit log")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="abhed-installer", epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Verify, install, upgrade, roll back, check and remove Abhed on an "
                    "offline host.")
    ap.add_argument("--version", action="store_true", help="print the installer's version")
    sub = ap.add_subparsers(dest="verb", metavar="VERB")

    p = sub.add_parser("verify", help="check a bundle's signature and every member's digest")
    p.add_argument("bundle", type=Path)
    _trust(p)
    _prefix(p)
    p.add_argument("--allow-downgrade", action="store_true")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("preflight", help="check this host against a bundle's platform")
    p.add_argument("bundle", type=Path)
    _trust(p)
    _prefix(p)
    p.add_argument("--python", default=None, help="the CPython to build the venv with")
    _links(p)
    _role(p)
    p.add_argument("--json", action="store_true")

    for verb, what in (("install", "first install of a bundle"),
                       ("upgrade", "install a newer bundle beside the current one and switch")):
        p = sub.add_parser(verb, help=what)
        p.add_argument("bundle", type=Path)
        _trust(p)
        _prefix(p)
        p.add_argument("--python", default=None, help="the CPython to build the venv with")
        p.add_argument("--allow-downgrade", action="store_true",
                       help="accept an older version than installed (recorded)")
        p.add_argument("--skip-gate", action="store_true",
                       help="switch without the health gate (recorded; not advised)")
        _accept(p)
        _links(p)
        _drop(p)
        _role(p)
        p.add_argument("--drop-local-settings", action="store_true",
                       help="upgrade without this host's tightening of the site settings when "
                       "it no longer narrows the new bundle's (recorded)")

    p = sub.add_parser("rollback", help="switch back to the previous release (health-gated)")
    _prefix(p)
    p.add_argument("--to", type=int, default=None, metavar="VERSION",
                   help="switch to this installed release instead of the previous one")
    p.add_argument("--skip-gate", action="store_true")
    _accept(p)
    _drop(p)
    p.add_argument("--switch-role", action="store_true",
                   help="go back to a release installed for another role (recorded)")

    p = sub.add_parser("status", help="releases, current, service, model, last audit entries")
    _prefix(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("check", help="re-hash the installed tree (like rpm -V)")
    _prefix(p)
    p.add_argument("--release", type=int, default=None, help="default: the current one")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("site", help="narrow the current release's site settings on this host "
                       "(tighten FILE), or go back to the signed ones (reset)")
    ssub = p.add_subparsers(dest="site_verb", metavar="VERB", required=True)
    s = ssub.add_parser("tighten", help="narrow the signed settings by FILE (config.json's keys; "
                        "checked by the release's own abhed: only a narrowing is taken)")
    s.add_argument("file", type=Path)
    _prefix(s)
    s = ssub.add_parser("reset", help="go back to the signed settings")
    _prefix(s)

    p = sub.add_parser("repair", help="put the current release's site layer (settings, "
                       "links) back as installed")
    _prefix(p)

    p = sub.add_parser("uninstall", help="remove Abhed from the prefix (the audit log stays)")
    _prefix(p)
    p.add_argument("--keep-data", action="store_true", help="keep PREFIX/data (sessions, config)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    p = sub.add_parser("ca", help="the site's CA for the model service (on the operator's "
                       "machine): make it, issue, rotate and revoke host credentials")
    csub = p.add_subparsers(dest="ca_verb", metavar="VERB", required=True)
    c = csub.add_parser("init", help="make the site CA in DIR (kept if it is there)")
    c.add_argument("ca_dir", type=Path, metavar="DIR")
    c.add_argument("--site", required=True, help="the site's name (in the CA's subject)")
    c.add_argument("--days", type=_days, default=3650, help="the CA's validity (default 3650)")
    c = csub.add_parser("issue", help="issue a host's credential (kept if it has a valid one)")
    c.add_argument("ca_dir", type=Path, metavar="DIR")
    c.add_argument("--host", required=True, help="the host's name (its certificate's subject)")
    c.add_argument("--role", required=True, choices=("agent", "model", "all"))
    c.add_argument("--dns", action="append", default=[], help="another DNS name it serves as")
    c.add_argument("--ip", action="append", default=[], help="an IP address it serves on")
    c.add_argument("--days", type=_days, default=397, help="validity (default 397)")
    c.add_argument("--out", type=Path, required=True, help="the credential file to write (0600)")
    c.add_argument("--rotate", action="store_true",
                   help="replace a valid credential (the old one is revoked)")
    c = csub.add_parser("revoke", help="revoke every credential of a host")
    c.add_argument("ca_dir", type=Path, metavar="DIR")
    c.add_argument("--host", required=True)

    p = sub.add_parser("credential", help="this host's site credential and the CA's "
                       "revocation list")
    rsub = p.add_subparsers(dest="cred_verb", metavar="VERB", required=True)
    r = rsub.add_parser("install", help="keep FILE (from `ca issue`) as this host's credential")
    r.add_argument("file", type=Path)
    _prefix(r)
    r = rsub.add_parser("crl", help="install the CA's revocation list (model hosts)")
    r.add_argument("file", type=Path)
    _prefix(r)

    p = sub.add_parser("engineer", help="enroll or revoke an engineer (a Unix user) for the "
                       "model service on this host")
    esub = p.add_subparsers(dest="eng_verb", metavar="VERB", required=True)
    for verb in ("enroll", "revoke"):
        e = esub.add_parser(verb, help=f"{verb} USER")
        e.add_argument("user")
        _prefix(e)

    p = sub.add_parser("audit", help="the hash-chained audit log")
    asub = p.add_subparsers(dest="audit_verb", metavar="VERB", required=True)
    a = asub.add_parser("verify", help="check the hash chain and the head witness")
    _prefix(a)
    a.add_argument("--json", action="store_true")
    a = asub.add_parser("show", help="print the last entries")
    _prefix(a)
    a.add_argument("-n", type=int, default=20)
    a.add_argument("--json", action="store_true")
    return ap


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("abhed")
    except PackageNotFoundError:
        return os.environ.get("ABHED_INSTALLER_VERSION", "frozen")


def main(argv: Sequence[str] | None = None) -> int:
    from ._proc import handle_signals

    ap = build_parser()
    args = ap.parse_args(argv)
    if args.version:
        sys.stdout.write(f"abhed-installer {_version()}\n")
        return 0
    if args.verb is None:
        ap.print_help(sys.stderr)
        return ExitCode.USAGE
    if getattr(args, "prefix", None) is None and hasattr(args, "prefix"):
        args.prefix = Path(os.environ.get("ABHED_PREFIX") or "/opt/abhed")
    handle_signals()
    try:
        module = importlib.import_module(f"installer._verbs.{args.verb}")
        return int(module.run(args))
    except InstallerError as exc:
        sys.stderr.write(f"abhed-installer: error: {exc}\n")
        return int(exc.exit_code)
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        sys.stderr.write("abhed-installer: interrupted; every step taken was undone, the host "
                         "is as it was before\n")
        return int(ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED)
