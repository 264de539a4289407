"""``abhed bundle ...``: make, sign, check, look into and carry offline bundles.

Exit codes: 0 done, 1 refused or failed (the message says what and what to do),
2 usage error.  Long steps show bytes and rate on stderr when it is a terminal,
and a one-line summary always.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import click

import bundle
from bundle import BundleError, PublicKey, SecretKey, TrustPolicy
from models.bundle_kit import BUNDLE_KIT

_FILE = click.Path(dir_okay=False, path_type=Path)
_EXISTING = click.Path(exists=True, dir_okay=False, path_type=Path)
_DIR = click.Path(file_okay=False, path_type=Path)


def check_settings(settings: Mapping[str, Any]) -> None:
    """The site's ``[agent]`` table against the agent's own ``Config``, strictly: unknown
    keys and wrong types are refused, every one named (``bundle`` cannot import the agent,
    so gather and build are handed this)."""
    from appliance.compose import Config
    from foundation import DocumentError, validate_document

    try:
        validate_document(dict(settings), Config, what="agent settings", source="[agent]")
    except DocumentError as exc:
        problems = exc.problems
        shown = "; ".join(f"{p.where}: {p.message}" for p in problems[:8])
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise ValueError(f"{shown}{more}; the keys and nesting are config.json's "
                         "(docs/configuration.md)") from None


def _fail(exc: BundleError) -> NoReturn:
    click.echo(f"refused: {exc}", err=True)
    sys.exit(1)


_MAX_KEY_FILE = 64 * 1024
_MAX_STATEMENT = 1024 * 1024


def _read_bytes(path: Path, what: str, cap: int) -> bytes:
    """A small operator-named file; a FIFO or device is refused, never waited on."""
    try:
        return bundle.read_regular(path, cap, what)
    except BundleError as exc:
        raise click.UsageError(str(exc)) from None


def _read_text(path: Path, what: str) -> str:
    try:
        return _read_bytes(path, what, _MAX_KEY_FILE).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"cannot read {what} {path}: {exc}") from None


def _public_keys(paths: tuple[Path, ...]) -> tuple[PublicKey, ...]:
    try:
        return tuple(PublicKey.from_text(_read_text(p, "public key")) for p in paths)
    except BundleError as exc:
        raise click.UsageError(str(exc)) from None


def _secret_keys(paths: tuple[Path, ...]) -> list[SecretKey]:
    try:
        return [SecretKey.from_text(_read_text(p, "secret key")) for p in paths]
    except BundleError as exc:
        raise click.UsageError(str(exc)) from None


def _trust(paths: tuple[Path, ...], threshold: int, rotations: tuple[Path, ...]) -> TrustPolicy:
    try:
        policy = TrustPolicy(keys=_public_keys(paths), threshold=threshold)
        for statement in rotations:
            raw = _read_bytes(statement, "rotation statement", _MAX_STATEMENT)
            sig = _read_bytes(Path(f"{statement}.minisig"), "rotation signature", _MAX_KEY_FILE)
            policy = bundle.rotate_trust(policy, raw, sig)
    except BundleError as exc:
        _fail(exc)
    return policy


class _Meter:
    """Progress on stderr: live on a terminal, a summary line always."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.last = 0.0
        self.live = sys.stderr.isatty()
        self.step = ""
        self.done = 0

    def __call__(self, step: str, done: int, total: int) -> None:
        self.step, self.done = step, done
        now = time.monotonic()
        if self.live and (now - self.last >= 0.5 or done == total):
            self.last = now
            rate = done / max(now - self.start, 1e-6) / 2**20
            click.echo(f"\r{step}: {done / 2**20:,.1f} / {total / 2**20:,.1f} MiB "
                       f"({rate:,.1f} MiB/s)", err=True, nl=False)

    def summary(self, what: str) -> None:
        took = time.monotonic() - self.start
        if self.live:
            click.echo("", err=True)
        rate = self.done / max(took, 1e-6) / 2**20
        click.echo(f"{what}: {self.done:,} bytes in {took:.1f} s ({rate:,.1f} MiB/s)", err=True)


def _verify_progress(meter: _Meter) -> Callable[[int, int], None]:
    return lambda done, total: meter("verify", done, total)


def _size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise click.BadParameter(f"{text!r} is not a size like 4G, 700M or 1048576")
    return int(m.group(1)) << (10 * " KMGT".index((m.group(2) or " ").upper()))


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bundle.Manifest):
        return value.model_dump(mode="json")
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


@click.group()
def bundle_group() -> None:
    """Build, sign, verify, inspect and carry offline bundles."""


@bundle_group.command()
@click.option("--out", "prefix", required=True, type=_FILE,
              help="Writes PREFIX.key (secret, mode 0600) and PREFIX.pub.")
def keygen(prefix: Path) -> None:
    """Make an Ed25519 signing key pair in minisign's formats.

    Also writes PREFIX.model-signing.pub: the public half of the P-256 key the
    builds derive from the secret key to sign model directories (OpenSSF model
    signing), for the site's own `model_signing verify`.
    """
    sk_path, pk_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    model_pub = Path(f"{prefix}.model-signing.pub")
    for p in (sk_path, pk_path, model_pub):
        if p.exists():
            raise click.UsageError(f"{p} already exists; keys are never overwritten")
    key = SecretKey.generate()
    import hashlib
    import os

    from models import public_key_pem

    fd = os.open(sk_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.to_text())
    pk_path.write_text(key.public_key().to_text())
    pem = public_key_pem(key.model_signing_key())
    model_pub.write_bytes(pem)
    click.echo(f"key id {key.public_key().id_hex}: secret {sk_path}, public {pk_path}")
    click.echo(f"model signing (P-256, derived from the secret key): public {model_pub}, "
               f"sha256 {hashlib.sha256(pem).hexdigest()}")


@bundle_group.command()
@click.argument("spec", type=_EXISTING)
@click.option("--out", required=True, type=_FILE, help="The bundle file to write.")
@click.option("--key", "keys", required=True, multiple=True, type=_EXISTING,
              help="Secret key to sign with; repeat for k-of-n signing.")
def build(spec: Path, out: Path, keys: tuple[Path, ...]) -> None:
    """Build the bundle SPEC describes (TOML or JSON) and sign it."""
    secret = _secret_keys(keys)
    meter = _Meter()
    try:
        manifest = bundle.build_bundle(spec, out, secret, progress=meter,
                                       check_settings=check_settings, model_kit=BUNDLE_KIT)
    except BundleError as exc:
        _fail(exc)
    meter.summary("built")
    click.echo(f"built {out}: {manifest.name} version {manifest.version}, "
               f"{len(manifest.members)} members, {out.stat().st_size:,} bytes")


@bundle_group.command()
@click.argument("site", type=_EXISTING)
@click.option("--out", type=_FILE, default=None, help="The bundle file to write.")
@click.option("--key", "keys", multiple=True, type=_EXISTING,
              help="Secret key to sign with; repeat for k-of-n signing.")
@click.option("--resolve-only", is_flag=True,
              help="Resolve the target's wheels and print the lock and download size; fetch nothing.")
@click.option("--lock-out", type=_FILE, default=None, help="Also write the hash lock here.")
@click.option("--cache", "cache_dir", type=_DIR, default=None,
              help="Content-addressed cache (default $ABHED_CACHE or ~/.cache/abhed).")
@click.option("--split", "split_text", default=None,
              help="Also split the bundle into volumes of this size (e.g. 4095M).")
@click.option("--split-out", type=_DIR, default=None, help="Directory for the volumes.")
@click.option("--reuse-weights-from", "earlier", multiple=True, type=_EXISTING,
              help="An earlier bundle the hosts already installed: model files it carried are "
                   "referenced by hash, not carried again. Repeat for several.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def gather(site: Path, out: Path | None, keys: tuple[Path, ...], resolve_only: bool,
           lock_out: Path | None, cache_dir: Path | None, split_text: str | None,
           split_out: Path | None, earlier: tuple[Path, ...], as_json: bool) -> None:
    """Gather a site's whole appliance from SITE (a site spec, TOML) and build the bundle."""
    if not resolve_only and (out is None or not keys):
        raise click.UsageError("--out and --key are needed (or pass --resolve-only)")
    secret = _secret_keys(keys) if keys else []
    meter = _Meter()
    try:
        result = bundle.gather(site, out, secret, cache=cache_dir, resolve_only=resolve_only,
                               progress=meter, split_size=_size(split_text) if split_text else None,
                               split_dir=split_out, reuse_weights_from=earlier,
                               check_settings=check_settings, model_kit=BUNDLE_KIT)
    except BundleError as exc:
        _fail(exc)
    if lock_out is not None:
        lock_out.write_text(result.lock)
    size = f"{result.download_bytes / 2**30:,.2f} GiB"
    if result.unknown_sizes:
        size += f" (+{result.unknown_sizes} wheels of unknown size)"
    if as_json:
        click.echo(json.dumps({"wheels": [w.__dict__ for w in result.wheels],
                               "download_bytes": result.download_bytes,
                               "unknown_sizes": result.unknown_sizes,
                               "bundle": str(result.bundle) if result.bundle else None,
                               "volumes": str(result.volumes) if result.volumes else None,
                               "steps": [{"step": n, "seconds": round(t, 2), "bytes": b}
                                         for n, t, b in result.steps]}, sort_keys=True))
        return
    if resolve_only:
        click.echo(result.lock, nl=False)
        click.echo(f"# {len(result.wheels)} wheels, {size} to download", err=True)
        return
    for name, took, nbytes in result.steps:
        click.echo(f"  {name:10} {took:8.1f} s  {nbytes / 2**20:12,.1f} MiB", err=True)
    click.echo(f"gathered {out}: {len(result.wheels)} wheels ({size})"
               + (f"; volumes: {result.volumes}" if result.volumes else ""))


_trust_options = [
    click.option("--trust", "trust", required=True, multiple=True, type=_EXISTING,
                 help="Trusted public key (minisign .pub); repeat for several."),
    click.option("--threshold", default=1, show_default=True,
                 help="How many distinct trusted keys must have signed."),
    click.option("--rotation", "rotations", multiple=True, type=_EXISTING,
                 help="Key-rotation statement (with STATEMENT.minisig beside it), applied "
                      "in order to the trusted keys."),
]


def _with_trust(f: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(_trust_options):
        f = option(f)
    return f


@bundle_group.command()
@click.argument("file", type=_EXISTING)
@_with_trust
@click.option("--installed-version", type=int, default=None,
              help="Version recorded on this host; older bundles are refused.")
@click.option("--allow-downgrade", is_flag=True,
              help="Accept a bundle older than --installed-version (record it!).")
@click.option("--stage", type=_DIR, default=None,
              help="Unpack into this new directory (removed again on any failure).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(file: Path, trust: tuple[Path, ...], threshold: int, rotations: tuple[Path, ...],
           installed_version: int | None, allow_downgrade: bool, stage: Path | None,
           as_json: bool) -> None:
    """Check FILE's signature, then every member's length and sha256."""
    policy = _trust(trust, threshold, rotations)
    meter = _Meter()
    try:
        result = bundle.verify_bundle(file, policy, installed_version=installed_version,
                                      allow_downgrade=allow_downgrade, stage_to=stage,
                                      progress=_verify_progress(meter))
    except BundleError as exc:
        _fail(exc)
    meter.summary("verified")
    m = result.manifest
    if as_json:
        click.echo(json.dumps({"ok": True, "name": m.name, "version": m.version,
                               "signers": list(result.signers), "downgrade": result.downgrade,
                               "staged": str(result.staged) if result.staged else None,
                               "members": len(m.members),
                               "references": [r.model_dump() for r in m.references]},
                              sort_keys=True))
        return
    click.echo(f"OK {file}: {m.name} version {m.version}, {len(m.members)} members, "
               f"signed by {', '.join(result.signers)}"
               + (" (DOWNGRADE allowed by operator)" if result.downgrade else "")
               + (f"; unpacked into {result.staged}" if result.staged else ""))
    _say_references(m)


def _say_references(m: bundle.Manifest) -> None:
    if not m.references:
        return
    carriers = sorted({r.carried_by for r in m.references})
    click.echo(f"references {len(m.references)} model file(s), {m.referenced_size:,} bytes, "
               f"not carried: the host must already hold them from {', '.join(carriers)} "
               "(the installer links them from its store by sha256, or refuses)")


@bundle_group.command()
@click.argument("file", type=_EXISTING)
@click.option("--trust", multiple=True, type=_EXISTING,
              help="Check the manifest signature against these keys (payload not hashed).")
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def inspect(file: Path, trust: tuple[Path, ...], as_json: bool) -> None:
    """Show what FILE holds, without unpacking it."""
    policy = TrustPolicy(keys=_public_keys(trust)) if trust else None
    try:
        info = bundle.inspect_bundle(file, policy)
    except BundleError as exc:
        _fail(exc)
    if as_json:
        body = _jsonable(info)
        body["settings"] = json.loads(info.settings) if info.settings is not None else None
        click.echo(json.dumps(body, sort_keys=True, indent=2))
        return
    m = info.manifest
    p = m.platform
    state = ("signature VERIFIED against the given keys" if info.trusted
             else "signature NOT verified (pass --trust)" if policy is None
             else "signature NOT trusted by the given keys")
    click.echo(f"{m.name} version {m.version} ({m.format}): {state}")
    gpu = f"nvidia driver>={p.nvidia_driver_min} cuda {p.cuda}" if p.accelerator == "nvidia" \
        else "cpu"
    click.echo(f"platform: {p.os} {p.arch}, glibc>={p.glibc}, CPython {p.python}, {gpu}")
    for s in info.signers:
        click.echo(f"signer: {s.key_id} [{s.algorithm}] {s.status}: {s.trusted_comment}")
    click.echo("components:")
    for c in m.components:
        click.echo(f"  {c.kind:9} {c.name} {c.version or ''}".rstrip()
                   + f"  ({len(c.members)} file(s))")
    click.echo(f"members ({len(m.members)}, {m.payload_size:,} bytes stored):")
    for mem in m.members:
        click.echo(f"  {mem.size:>14,}  {mem.compression:4}  {mem.name}")
    for ref in m.references:
        click.echo(f"  {ref.content_size:>14,}  ref   {ref.name}  (sha256 {ref.content_sha256[:16]}, "
                   f"carried by {ref.carried_by})")
    _say_references(m)
    _say_roles(m)
    click.echo("sbom: " + ", ".join(f"{n} {k}" for k, n in info.sbom_summary.items()))
    click.echo(f"built by {m.provenance.builder} from {len(m.provenance.inputs)} inputs")
    _say_settings(info)
    for problem in info.problems:
        click.echo(f"PROBLEM: {problem}")
    if info.problems:
        sys.exit(1)


def _say_roles(m: bundle.Manifest) -> None:
    """Which hosts the bundle serves and what each installs (docs/bundle.md, Hosts by role)."""
    if m.roles is None:
        click.echo("roles: all (one host does everything; no [roles] in the spec)")
        return
    click.echo(f"roles: {', '.join(m.roles.hosts)}")
    for role in ("agent", "model"):
        view = m.for_role(role)
        size = sum(x.content_size for x in view.members) + view.referenced_size
        click.echo(f"  {role:5}  {len(view.members) + len(view.references)} file(s), "
                   f"{size:,} bytes unpacked")
    if m.roles.model_endpoints:
        click.echo(f"  model endpoints (agent hosts): {', '.join(m.roles.model_endpoints)}")
        if m.roles.router is not None:
            r = m.roles.router
            click.echo(f"  router: vllm-router on {r.host} ({r.policy}) over "
                       f"{', '.join(r.replicas)}")


def _say_settings(info: bundle.BundleInfo) -> None:
    site, member = info.manifest.site, info.manifest.settings_member()
    if site is None or member is None:
        click.echo("site settings: none (engineers' abhed gets no site layer from this bundle)")
        return
    click.echo(f"site settings: site {site.name}, for prefix {site.prefix}, {site.settings} "
               f"(sha256 {member.content_sha256}"
               + ("" if info.trusted else ", claimed: the signature was not checked") + "):")
    if info.settings is not None:
        for line in info.settings.decode("utf-8", "replace").splitlines():
            click.echo(f"  {line}")


@bundle_group.command()
@click.argument("old", type=_EXISTING)
@click.argument("new", type=_EXISTING)
@click.option("--trust", multiple=True, type=_EXISTING,
              help="Refuse unless both manifests are signed by these keys.")
@click.option("--json", "as_json", is_flag=True)
def diff(old: Path, new: Path, trust: tuple[Path, ...], as_json: bool) -> None:
    """What installing NEW over OLD would change."""
    policy = TrustPolicy(keys=_public_keys(trust)) if trust else None
    try:
        a, b = bundle.inspect_bundle(old, policy), bundle.inspect_bundle(new, policy)
    except BundleError as exc:
        _fail(exc)
    if policy is not None and not (a.trusted and b.trusted):
        _fail(bundle.SignatureError("a manifest is not signed by the given keys"))
    d = bundle.diff_bundles(a.manifest, b.manifest)
    lines = bundle.diff_settings(a, b, old_label=f"{old} {_settings_name(a)}",
                                 new_label=f"{new} {_settings_name(b)}")
    if as_json:
        body = _jsonable(d)
        body["settings_diff"] = lines
        click.echo(json.dumps(body, sort_keys=True, indent=2))
        return
    click.echo(f"version {d.old_version} -> {d.new_version}"
               + ("  (DOWNGRADE)" if d.new_version < d.old_version else ""))
    for title, items in (("platform", d.platform_changes), ("added", d.components_added),
                         ("removed", d.components_removed), ("changed", d.components_changed),
                         ("files added", d.files_added), ("files removed", d.files_removed),
                         ("files changed", d.files_changed)):
        for item in items:
            click.echo(f"{title}: {item}")
    click.echo(f"bytes to write: {d.bytes_to_write:,}")
    if not lines:
        same = "none in either" if a.settings is None else "unchanged"
        click.echo(f"site settings: {same}")
        return
    click.echo("site settings: changed")
    for line in lines:
        click.echo(line)
    summary = _settings_summary(a, b)
    if summary:
        click.echo(summary)


def _settings_summary(a: bundle.BundleInfo, b: bundle.BundleInfo) -> str | None:
    """One line: what the new bundle's settings loosen and tighten against the old's, by the
    rules that bound an engineer under a site (appliance.compose), one setting at a time:
    the new value as a narrowing of the old settings (refused: looser; narrower: tighter),
    else the old value as a narrowing of the new ones (a deny rule the new settings drop is
    inherited as a layer, but the old rule narrows the new settings: they are looser)."""
    from appliance import AbhedError
    from appliance.compose import Config, leaf_fields, rule_for
    from cli.config import compare_settings

    old, new = bundle.comparable_settings(a), bundle.comparable_settings(b)
    if old is None or new is None:
        return None
    try:
        before = Config.model_validate_json(json.dumps(old)).model_dump(mode="json")
        after = Config.model_validate_json(json.dumps(new)).model_dump(mode="json")
    except ValueError as exc:
        return f"site settings: not compared ({exc})"

    def verdict(setting: str) -> str | None:
        rule = rule_for(setting)
        if rule is None or rule.direction not in _ORDERED:
            return None  # no more-or-less in it (an extension, a provider): read the diff
        for base, value, flip in ((old, _dig(after, setting), False),
                                  (new, _dig(before, setting), True)):
            try:
                result = compare_settings(base, "a", _nest(setting, value), "b")
            except AbhedError:
                continue  # not a valid combination on its own: judged the other way round
            if result.loosened:
                return "tighter" if flip else "looser"
            if result.changes:
                return "looser" if flip else "tighter"
        return None  # a free choice (which provider is the default): neither

    def shown(setting: str) -> str:
        old_v, new_v = _dig(before, setting), _dig(after, setting)
        if isinstance(old_v, list | dict) or isinstance(new_v, list | dict):
            return setting
        return f"{setting} ({json.dumps(old_v)} -> {json.dumps(new_v)})"

    changed = [f for f in leaf_fields() if _dig(before, f) != _dig(after, f)]
    verdicts = {f: verdict(f) for f in changed}
    parts = []
    for word, label in (("looser", "LOOSER"), ("tighter", "tighter"), (None, "changed")):
        settings = [f for f in changed if verdicts[f] == word]
        if settings:
            parts.append(f"{label}: {'; '.join(map(shown, settings))}")
    return "site settings: " + (" | ".join(parts) or "no setting changed")


_ORDERED = ("stricter", "lower", "higher", "union", "subset", "stronger")
"""Directions with a more and a less; the others (site_only, kept, gated, free) only change."""


def _nest(path: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _settings_name(info: bundle.BundleInfo) -> str:
    return info.manifest.site.settings if info.manifest.site else "(no site settings)"


@bundle_group.command()
@click.argument("file", type=_EXISTING)
@click.option("--size", "size_text", required=True,
              help="Part size: 4G, 700M, ... (FAT32 media hold at most 4095M per file).")
@click.option("--out", "out_dir", required=True, type=_DIR, help="Directory for the parts.")
@click.option("--key", "keys", required=True, multiple=True, type=_EXISTING,
              help="Secret key to sign the volume index with.")
def split(file: Path, size_text: str, out_dir: Path, keys: tuple[Path, ...]) -> None:
    """Split FILE into volumes with a signed index, for removable media."""
    size = _size(size_text)
    secret = _secret_keys(keys)
    out_dir.mkdir(parents=True, exist_ok=True)
    if size >= 4 * 2**30:
        click.echo("note: FAT32 media cannot hold files of 4 GiB or more; use --size 4095M "
                   "for them", err=True)
    meter = _Meter()
    try:
        index = bundle.split_bundle(file, out_dir, size, secret, progress=meter)
    except (BundleError, FileExistsError) as exc:
        if isinstance(exc, FileExistsError):
            raise click.UsageError(f"{exc.filename} already exists; use an empty --out") from None
        _fail(exc)
    meter.summary("split")
    click.echo(f"index {index} (+ .minisig): copy it onto every medium with its parts")


@bundle_group.command()
@click.argument("index", type=_EXISTING)
@click.option("--out", required=True, type=_FILE, help="The joined bundle file.")
@_with_trust
@click.option("--from", "search", multiple=True, type=_DIR,
              help="Also look for parts here (e.g. another mounted medium).")
def join(index: Path, out: Path, trust: tuple[Path, ...], threshold: int,
         rotations: tuple[Path, ...], search: tuple[Path, ...]) -> None:
    """Join the volumes INDEX lists into --out, checking every part; resumable."""
    policy = _trust(trust, threshold, rotations)
    meter = _Meter()
    try:
        result = bundle.join_volumes(index, out, policy, search_dirs=search, progress=meter)
    except BundleError as exc:
        _fail(exc)
    meter.summary("joined")
    resumed = f" (resumed after part {result.resumed_parts})" if result.resumed_parts else ""
    click.echo(f"joined {len(result.index.parts)} parts into {out}{resumed}; now run "
               f"`abhed bundle verify {out} --trust ...`")


@bundle_group.command()
@click.option("--current", "current", required=True, multiple=True, type=_EXISTING,
              help="A currently trusted public key; repeat.")
@click.option("--current-threshold", default=1, show_default=True)
@click.option("--current-version", default=1, show_default=True,
              help="The trust version pinned on hosts now.")
@click.option("--new", "new", required=True, multiple=True, type=_EXISTING,
              help="A public key to trust from now on; repeat.")
@click.option("--threshold", default=1, show_default=True, help="The new threshold.")
@click.option("--key", "keys", required=True, multiple=True, type=_EXISTING,
              help="Secret keys signing the statement: enough old AND new ones.")
@click.option("--out", required=True, type=_FILE, help="Writes OUT and OUT.minisig.")
def rotate(current: tuple[Path, ...], current_threshold: int, current_version: int,
           new: tuple[Path, ...], threshold: int, keys: tuple[Path, ...], out: Path) -> None:
    """Write a key-rotation statement: the current keys introduce the new ones."""
    try:
        policy = TrustPolicy(keys=_public_keys(current), threshold=current_threshold,
                             version=current_version)
        statement, sig = bundle.make_rotation(policy, _public_keys(new), threshold,
                                              _secret_keys(keys))
        bundle.rotate_trust(policy, statement, sig)  # refuse to write one hosts would refuse
    except BundleError as exc:
        _fail(exc)
    out.write_bytes(statement)
    Path(f"{out}.minisig").write_bytes(sig)
    click.echo(f"wrote {out} and {out}.minisig (trust version {policy.version + 1})")


bundle_group.name = "bundle"
