"""``abhed config show``: the effective settings and where each value comes from.

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
from pathlib import Path
from typing import Any

import click

from appliance._errors import AbhedError
from appliance.cli._common import config_option

__all__ = ["config"]


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
