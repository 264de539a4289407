"""``abhed config show``: the effective settings and where each value comes from;
``abhed config narrow``: whether one settings file only narrows another.

Like ``git config --show-origin``: one line per setting (one per entry of a
list), the value after its origin (``site:FILE``, ``user:FILE``, ``flag``, or
``default``), so an engineer sees what governs their sessions and why a
loosening is refused.  A site layer that is present but broken is refused as
every door refuses it; settings of the engineer's that would loosen the site's
are listed after the values (which stay the site's), and the exit code is 2.

Exit codes: 0 shown, 2 a refusal (broken site layer, invalid file, a loosening).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from appliance import AbhedError, ConfigError
from cli._common import config_option

__all__ = ["Comparison", "compare_settings", "config"]


@click.group()
def config() -> None:
    """Show the effective settings and where each value comes from."""


def _value(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _shown(value: Any) -> Any:
    """A list entry as written: fields left unset (null, empty) are not shown."""
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items() if v not in (None, {}, [])}
    return value


def _rows(layered: Any) -> list[dict[str, Any]]:
    from appliance.compose import leaf_fields

    data = layered.config.model_dump(mode="json")
    rows: list[dict[str, Any]] = []
    for path in leaf_fields():
        value = _value(data, path)
        if isinstance(value, list) and value:
            for i, item in enumerate(value):
                origin = layered.origin(f"{path}[{i}]")
                rows.append({"setting": f"{path}[{i}]", "value": _shown(item), "origin": origin.kind,
                             "where": origin.where})
            continue
        origin = layered.origin(path)
        rows.append({"setting": path, "value": value, "origin": origin.kind, "where": origin.where})
    return rows


@config.command("show")
@click.argument("only", metavar="[SETTING]", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the site, the digests, "
              "every setting with its value and origin, and the refusals.")
@config_option
def show(only: str | None, as_json: bool, config_path: Path | None) -> None:
    """Print every effective setting with its origin (site, user, default).

    SETTING (e.g. ``policy`` or ``loop.max_turns``) shows only that setting or section.
    """
    from appliance.compose import find_site, layer, read_config

    try:
        site = find_site()
        user = read_config(config_path)
        layered = layer(site, user, user.source, refuse=False)
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None
    rows = _rows(layered)
    if only is not None:
        rows = [r for r in rows if r["setting"] == only or r["setting"].startswith((f"{only}.",
                                                                                  f"{only}["))]
        if not rows:
            from appliance.compose import leaf_fields

            sections = sorted({f.split(".")[0] for f in leaf_fields()})
            raise click.UsageError(f"no setting {only!r}; sections: {', '.join(sections)}")
    refusals = [r.line(site.settings_file) for r in layered.refusals] if site is not None else []
    record = layered.record()
    if as_json:
        out = {"site": None if site is None else {
                   "found_at": str(site.found_at), "directory": str(site.directory),
                   **site.origin.model_dump()},
               "user_file": user.source, "effective_settings_sha256": record[
                   "effective_settings_sha256"], "settings": rows, "refused": refusals}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    else:
        if site is None:
            click.echo("# no site settings apply: a development checkout (no /etc/abhed/site, "
                       "no abhed-site in this installation); your config is the whole policy")
        else:
            o = site.origin
            click.echo(f"# site {o.site!r}, release {o.release}: {site.settings_file}")
            click.echo(f"#   settings sha256 {o.settings_sha256}, bundle {o.bundle_manifest_sha256}, "
                       f"signed by {', '.join(o.signing_key_ids) or '(none)'}")
        click.echo(f"# your settings: {user.source}")
        click.echo(f"# effective settings sha256 {record['effective_settings_sha256']}")
        for row in rows:
            where = "default" if row["origin"] == "default" else f"{row['origin']}:{row['where']}"
            value = json.dumps(row["value"], ensure_ascii=False)
            click.echo(f"{where}\t{row['setting']}={value}")
        for line in refusals:
            click.echo(f"refused: {line}", err=True)
    if refusals:
        sys.exit(2)


@dataclass(frozen=True)
class Comparison:
    """How one set of settings stands to another: every loosening (as refusal lines), every
    narrowing (setting, before, after), and the first narrowed by the second when nothing
    loosens."""

    refusals: list[str]
    changes: list[dict[str, Any]]
    settings: dict[str, Any] | None
    loosened: list[dict[str, str]]  # setting, signed (the base's), asked (the other's)


def compare_settings(base: Mapping[str, Any], base_label: str, other: Mapping[str, Any],
                     other_label: str, *, whole: bool = False) -> Comparison:
    """``other`` against ``base`` by the rules that bound an engineer under a site (the one
    narrowing module, ``appliance.compose``): ``base`` stands as the site layer, ``other`` as
    the engineer's.  ``whole``: ``other`` is complete settings, so a key it leaves out means
    its default (two bundles' settings); otherwise it is an overlay that inherits what it
    leaves out (a tightening)."""
    import hashlib

    from appliance.compose import Config, SiteLayer, SiteOrigin, layer, leaf_fields
    from foundation import DocumentError, validate_document

    try:
        signed = validate_document(dict(base), Config, what="settings", source=base_label)
        over = validate_document(dict(other), Config, what="settings", source=other_label)
    except DocumentError as exc:
        raise ConfigError(str(exc)) from None
    # whole: both complete, every field set, so that a key one leaves out counts as its default
    raw = signed.model_dump(mode="json", exclude_unset=not whole)
    mine = over.model_dump(mode="json", exclude_unset=not whole)
    if whole:
        signed = Config.model_validate_json(json.dumps(raw))
        over = Config.model_validate_json(json.dumps(mine))
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()
    origin = SiteOrigin(format="abhed-site-origin/1", site="(compared)", release="-",
                        bundle_manifest_sha256="0" * 64, signing_key_ids=[],
                        settings_sha256=digest)
    where = Path(base_label)
    site = SiteLayer(where, where.parent, signed, raw, origin)
    layered = layer(site, over, other_label, refuse=False)
    effective = layered.config.model_dump(mode="json", exclude_unset=True)
    sandbox = effective.get("sandbox", {})
    if "image_dir" not in raw.get("sandbox", {}) and "image_dir" not in mine.get("sandbox", {}):
        sandbox.pop("image_dir", None)  # the layer's default for a site, not a setting
        if not sandbox:
            effective.pop("sandbox", None)
    before = signed.model_dump(mode="json")
    after = Config.model_validate_json(json.dumps(effective)).model_dump(mode="json")
    changes = [{"setting": f, "signed": _value(before, f), "narrowed": _value(after, f)}
               for f in leaf_fields() if _value(before, f) != _value(after, f)]
    refusals = [r.line(where) for r in layered.refusals]
    loosened = [{"setting": r.setting, "signed": r.site, "asked": r.asked}
                for r in layered.refusals]
    return Comparison(refusals, changes, None if refusals else effective, loosened)


@config.command("narrow")
@click.argument("signed", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: narrows, the refusals, the changes, the settings.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write that JSON object here (for abhed-installer).")
def narrow(signed: Path, file: Path, as_json: bool, out: Path | None) -> None:
    """Whether FILE only narrows SIGNED (both with config.json's keys), by the same rules that
    bound an engineer's settings under a site's: the settings SIGNED narrowed by FILE, or
    every loosening, named.

    ``abhed-installer site tighten`` asks this of the release it governs; an operator may ask
    it before carrying a tightening to the host.  Exit codes: 0 a narrowing (or no change),
    2 a loosening or a file that is not valid settings.
    """
    from appliance.compose import read_config

    try:
        base = read_config(signed).model_dump(mode="json", exclude_unset=True)
        over = read_config(file).model_dump(mode="json", exclude_unset=True)
        result = compare_settings(base, str(signed), over, str(file))
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None
    refusals, changes, effective = result.refusals, result.changes, result.settings
    body = {"narrows": not refusals, "refusals": refusals, "changes": changes,
            "settings": effective}
    if out is not None:
        out.write_text(json.dumps(body, ensure_ascii=False, sort_keys=True) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(body, ensure_ascii=False, sort_keys=True) + "\n")
    elif refusals:
        for line in refusals:
            click.echo(f"refused: {line}", err=True)
    else:
        for c in changes:
            click.echo(f"narrower: {c['setting']}: {json.dumps(c['signed'])} -> "
                       f"{json.dumps(c['narrowed'])}")
        if not changes:
            click.echo(f"{file} changes nothing in {signed}")
    if refusals:
        sys.exit(2)
