"""``check``: re-hash a release against its record and the signed manifest, like ``rpm -V``.

The record's and release.json's sha256 are taken from the audit log (whose
chain is verified first), so neither file can be edited to hide a change.
The site layer gets more: its settings against the signed member, its
directory's owner and mode (the record holds files and links, not
directories), and, for the current release, the host and PATH links.
"""

from __future__ import annotations

import argparse
import hashlib

from foundation import FoundationError, parse_document, read_regular

from .._audit import AuditLog
from .._errors import CheckFailed, NotInstalled
from .._layout import Layout, State
from .._local import expected_settings_sha256
from .._record import RECORD_NAME, compare_tree, load_record
from .._site_install import (
    SITE_DIR,
    VENV_LINK,
    HostLinks,
    link_problems,
    release_has_site,
    site_dir_problems,
)
from .._ui import emit_json, out

MAX_RELEASE_BYTES = 64 << 20  # the signed manifest and a few fields


def run(args: argparse.Namespace) -> int:
    layout = Layout(args.prefix.absolute())
    version = args.release if args.release is not None else layout.current_version()
    if version is None or not layout.release(version).is_dir():
        raise NotInstalled(f"release {version} is not installed in {layout.prefix}"
                           if version is not None else f"nothing is current in {layout.prefix}")
    rel = layout.release(version)
    audit = AuditLog(layout.audit_dir)
    audit.verify()
    entry = audit.recorded(version)
    problems: list[str] = []
    if entry is None:
        problems.append(f"the audit log has no record entry for release {version}")
    record_path = rel / RECORD_NAME
    try:
        record = load_record(record_path)
    except FoundationError as exc:
        raise CheckFailed(f"cannot read {record_path}: {exc}\nThe release cannot be checked: "
                          "reinstall it from its bundle") from None
    files = record.files
    if entry is not None and record.sha256 != entry.get("record_sha256"):
        problems.append(f"{RECORD_NAME} differs from the one recorded in the audit log "
                        f"(seq {entry.get('seq')}): it was edited")
    result = compare_tree(rel, files)
    # The record's bundle files must be exactly the signed manifest's members, as release.json
    # holds them: read once, its digest held to the audit log's, then parsed.
    release_path = rel / "release.json"
    try:
        data = read_regular(release_path, MAX_RELEASE_BYTES, "release.json")
        if entry is not None and hashlib.sha256(data).hexdigest() != entry.get("release_sha256"):
            problems.append(f"release.json differs from the one recorded in the audit log "
                            f"(seq {entry.get('seq')}): it was edited")
        manifest = parse_document(data, what="release.json", source=release_path)["manifest"]
        expected = {("bundle/" + (m["name"][:-4] if m["compression"] == "zstd" else m["name"])):
                    m["content_sha256"] for m in manifest["members"]}
        if manifest.get("site"):
            # the installed settings are the signed member's bytes, byte for byte, or those
            # of a local tightening: whichever the audit log last recorded for this release
            expected[f"{SITE_DIR}/settings.json"] = expected_settings_sha256(audit, version) \
                or expected["bundle/" + manifest["site"]["settings"]]
        for path, digest in expected.items():
            if files.get(path, {}).get("sha256") != digest:
                problems.append(f"{path}: the record disagrees with the signed manifest")
    except (FoundationError, KeyError, TypeError) as exc:
        problems.append(f"release.json is unreadable ({exc}): the manifest cannot be compared")
    site: list[str] = []
    carries_site = release_has_site(rel) or any(p.startswith(f"{SITE_DIR}/") for p in files)
    if carries_site:
        site += site_dir_problems(rel)
    if version == layout.current_version():
        site += link_problems(layout, HostLinks.of(State.load(layout)), carries_site)
    touched = site + [p for p in result.added + result.missing + [a for a, _ in result.altered]
                      if p.startswith((f"{SITE_DIR}/", VENV_LINK))]
    problems += site
    report = {"release": version, "added": result.added, "missing": result.missing,
              "altered": [{"path": p, "why": w} for p, w in result.altered],
              "problems": problems, "site_layer_ok": not touched,
              "ok": result.clean and not problems}
    if args.json:
        emit_json(report)
    else:
        for p in result.added:
            out(f"added    {p}")
        for p in result.missing:
            out(f"missing  {p}")
        for p, why in result.altered:
            out(f"altered  {p}  ({why})")
        for p in problems:
            out(f"problem  {p}")
        if report["ok"]:
            out(f"release {version}: {len(files)} files match the record and the signed manifest")
    if not report["ok"]:
        n = len(result.added) + len(result.missing) + len(result.altered) + len(problems)
        site_note = ("the site layer is not as installed, so engineers' abhed refuses to "
                     "start or runs under settings nobody signed: `abhed-installer repair` puts "
                     "its files and links back from the release's verified bundle (recorded); "
                     "for anything else " if touched else "")
        raise CheckFailed(f"release {version}: {n} difference(s) from what was installed; "
                          f"{site_note}reinstall the release (uninstall, install) or roll back "
                          "to another, and find out who changed the files")
    return 0
