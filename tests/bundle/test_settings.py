"""The site's agent settings as a signed member (``site/settings.json``): built from a spec's
``[site.settings]`` (a site spec's ``[agent]``), checked by the agent's own ``Config``,
expanded, verified, inspected and diffed; and hostile, oversized and malformed tables.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bundle import (
    DigestMismatch,
    FormatError,
    SecretKey,
    SpecError,
    TrustPolicy,
    build_bundle,
    diff_settings,
    inspect_bundle,
    release_paths,
    verify_bundle,
)
from bundle._manifest import parse_manifest
from cli.bundle import bundle_group, check_settings
from models.bundle_kit import BUNDLE_KIT

from .conftest import forge, manifest_for

SETTINGS: dict[str, Any] = {
    "catalog": "{release}/bundle/models/tiny/catalog.json",
    "default_provider": "site",
    "custom_providers": [{"name": "site", "api": "openai",
                          "base_url": "http://127.0.0.1:8000/v1", "model": "tiny"}],
    "extensions": [{"name": "redact", "command": "{release}/venv/bin/python",
                    "args": ["{release}/bundle/site/files/redact.py"]}],
    "policy": {"mode": "ask", "deny": [{"tool": "bash", "program": "curl",
                                        "reason": "no network"}]},
    "tools": {"ignore": ["[0-9]{3}.log"]},
    "events": {"witness_dir": "{prefix}/witness"},
}


def _spec(root: Path, settings: Any = None, *, version: int = 3, prefix: str | None = None,
          files: list[str] | None = None, extra: dict[str, Any] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    model = root / "tiny"
    model.mkdir(exist_ok=True)
    (model / "catalog.json").write_text('{"models": []}\n')
    (model / "weights.bin").write_bytes(b"w" * 100)
    (root / "redact.py").write_text("print('redact')\n")
    site: dict[str, Any] = {"name": "plant-7",
                            "settings": SETTINGS if settings is None else settings,
                            "files": ["redact.py"] if files is None else files}
    if prefix is not None:
        site["prefix"] = prefix
    spec: dict[str, Any] = {
        "format": "abhed-bundle-spec/1", "name": "plant", "version": version,
        "source_date_epoch": 1700000000,
        "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                     "accelerator": "cpu"},
        "model": [{"name": "tiny", "dir": "tiny", "licence": "MIT", "source": "test"}],
        "site": site, **(extra or {})}
    path = root / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _build(tmp_path: Path, key: SecretKey, name: str = "a", **kw: Any) -> Path:
    out = tmp_path / f"{name}.abhed"
    build_bundle(_spec(tmp_path / name, **kw), out, [key], check_settings=check_settings,
                 model_kit=BUNDLE_KIT)
    return out


def test_settings_are_a_signed_member_with_their_paths_expanded(tmp_path: Path, key: SecretKey,
                                                                trust: TrustPolicy) -> None:
    out = _build(tmp_path, key, prefix="/srv/abhed")
    vb = verify_bundle(out, trust, stage_to=tmp_path / "stage")
    m = vb.manifest
    assert m.site is not None and (m.site.name, m.site.prefix) == ("plant-7", "/srv/abhed")
    assert {c.kind: c.members for c in m.components}["site"] == (
        "site/settings.json", "site/files/redact.py")
    raw = (tmp_path / "stage/site/settings.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == m.settings_member().content_sha256  # type: ignore[union-attr]
    # canonical: sorted keys, two-space indent, UTF-8, a final newline
    assert raw == (json.dumps(json.loads(raw), sort_keys=True, indent=2, ensure_ascii=False)
                   + "\n").encode()
    body = json.loads(raw)
    assert body["catalog"] == "/srv/abhed/releases/3/bundle/models/tiny/catalog.json"
    assert body["extensions"][0]["command"] == "/srv/abhed/releases/3/venv/bin/python"
    assert body["events"]["witness_dir"] == "/srv/abhed/witness"
    assert body["tools"]["ignore"] == ["[0-9]{3}.log"]  # other braces are left alone
    assert (tmp_path / "stage/site/files/redact.py").read_text() == "print('redact')\n"
    assert release_paths(body, "/srv/abhed/releases/3") == [
        "/srv/abhed/releases/3/bundle/models/tiny/catalog.json",
        "/srv/abhed/releases/3/bundle/site/files/redact.py",
        "/srv/abhed/releases/3/venv/bin/python"]
    # the SBOM names the site's files (CycloneDX "data")
    sbom = json.loads((tmp_path / "stage/sbom.cdx.json").read_text())
    assert any(c["type"] == "data" and c["name"] == "plant-7" for c in sbom["components"])


def test_the_sbom_with_site_settings_is_valid_cyclonedx(tmp_path: Path, key: SecretKey,
                                                        trust: TrustPolicy) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    verify_bundle(_build(tmp_path, key), trust, stage_to=tmp_path / "s")
    doc = (tmp_path / "s/sbom.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(doc) is None


def test_without_the_agents_check_settings_are_never_signed(tmp_path: Path,
                                                            key: SecretKey) -> None:
    with pytest.raises(SpecError, match="checked against the agent's schema"):
        build_bundle(_spec(tmp_path / "a"), tmp_path / "a.abhed", [key], model_kit=BUNDLE_KIT)
    assert not (tmp_path / "a.abhed").exists()


@pytest.mark.parametrize(("settings", "words"), [
    ({"policy": {"mode": "ask", "allow_everything": True}}, "policy.allow_everything"),
    ({"polcy": {"mode": "ask"}}, "polcy"),
    ({"policy": {"mode": "yolo"}}, "policy.mode"),
    ({"loop": {"max_turns": "50"}}, "loop.max_turns"),  # strict: no "50" for 50
    ({"sandbox": {"memory_mib": 1.5}}, "sandbox.memory_mib"),
    ({"default_provider": "elsewhere"}, "default_provider"),
    ({"extensions": "redact"}, "extensions"),
    ({"mcp_servers": [{"name": "../x", "command": "x"}]}, "mcp_servers[0].name"),
])
def test_settings_the_agent_would_refuse_are_refused_by_key(tmp_path: Path, key: SecretKey,
                                                            settings: Any, words: str) -> None:
    with pytest.raises(SpecError, match=re.escape(words)):
        _build(tmp_path, key, settings=settings, files=[])


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize(("settings", "words"), [
    ({"policy": {"deny": [{"reason": "x" * 300_000}]}}, "over the 262,144-byte cap"),
    ({"tools": {"ignore": [f"p{i}" for i in range(40_000)]}}, "over the 262,144-byte cap"),
    ({"a": _nested(70)}, "nested more than 64 levels"),  # the strict loader's limit
    ({"loop": {"deadline_s": float("nan")}}, "site.settings.loop.deadline_s: nan has no JSON"),
    ({"loop": {"deadline_s": float("inf")}}, "site.settings.loop.deadline_s: inf has no JSON"),
])
def test_hostile_and_oversized_tables_are_refused(tmp_path: Path, key: SecretKey,
                                                  settings: Any, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        _build(tmp_path, key, settings=settings, files=[])
    assert not (tmp_path / "a.abhed").exists()


def _toml(value: Any) -> str:
    """``value`` as TOML writes it: tables inline, strings quoted as JSON quotes them (a TOML
    basic string), a date bare (TOML's own type, which JSON lacks)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return json.dumps(value)


def test_a_toml_date_is_refused_by_key_not_a_crash(tmp_path: Path, key: SecretKey) -> None:
    body = json.loads(_spec(tmp_path / "a").read_text())
    body["site"]["settings"] = {"loop": {"deadline": datetime(1979, 5, 27, 7, 32, tzinfo=UTC)}}
    toml = tmp_path / "a" / "spec.toml"
    toml.write_text("".join(f"{name} = {_toml(value)}\n" for name, value in body.items()))
    assert '"deadline" = 1979-05-27T07:32:00Z' in toml.read_text()  # a date, not a string
    with pytest.raises(SpecError, match=r"site\.settings\.loop\.deadline: a TOML date"):
        build_bundle(toml, tmp_path / "t.abhed", [key], check_settings=check_settings,
                     model_kit=BUNDLE_KIT)


@pytest.mark.parametrize(("kw", "words"), [
    ({"settings": {"catalog": "{release}/bundle/models/tiny/nothere.json"}, "files": []},
     "carries no bundle/models/tiny/nothere.json"),
    ({"settings": {"catalog": "{release}/bundle/models/other"}, "files": []},
     "carries no bundle/models/other"),
    ({"files": ["missing.py"]}, "missing.py does not exist"),
    ({"files": ["redact.py", "tiny/../redact.py"]}, "share the file name"),
    ({"prefix": "/srv/x/"}, "normalised absolute directory"),
    ({"prefix": "/srv/../etc"}, "normalised absolute directory"),
    ({"prefix": "/"}, "site.prefix"),
    ({"prefix": "relative/x"}, "site.prefix"),
    ({"prefix": "/srv/a b"}, "site.prefix"),
])
def test_what_the_settings_name_must_be_carried(tmp_path: Path, key: SecretKey,
                                                kw: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError, match=words):
        _build(tmp_path, key, **kw)


def test_a_directory_the_bundle_carries_files_in_may_be_named(tmp_path: Path,
                                                              key: SecretKey) -> None:
    out = _build(tmp_path, key, settings={"sandbox": {"image_dir": "{release}/bundle/models"}},
                 files=[])
    assert inspect_bundle(out).settings is not None


def test_a_tampered_settings_member_is_refused_by_verify_and_named_by_inspect(
        tmp_path: Path, key: SecretKey, trust: TrustPolicy) -> None:
    out = _build(tmp_path, key)
    data = bytearray(out.read_bytes())
    at = data.index(b'"mode": "ask"')
    data[at:at + 13] = b'"mode": "aut'  + b"o"  # same length: only the digest can tell
    bad = tmp_path / "bad.abhed"
    bad.write_bytes(bytes(data))
    with pytest.raises(DigestMismatch, match="site/settings.json"):
        verify_bundle(bad, trust, stage_to=tmp_path / "stage")
    assert not (tmp_path / "stage").exists()
    info = inspect_bundle(bad, trust)
    assert info.trusted and info.settings is None
    assert any("site/settings.json" in p and "altered" in p for p in info.problems)


def test_hostile_manifests_about_the_site_are_refused(tmp_path: Path, key: SecretKey) -> None:
    settings = b'{"policy": {"mode": "plan"}}\n'
    members = [("sbom.cdx.json", b"{}"), ("site/settings.json", settings)]
    good = manifest_for(members)
    good["components"] = [{"kind": "site", "name": "plant", "version": None, "licence": None,
                           "source": None, "members": ["site/settings.json"]}]
    good["site"] = {"name": "plant", "prefix": "/opt/abhed", "settings": "site/settings.json"}
    parse_manifest(json.dumps(good).encode())  # the well-formed one parses
    cases: list[tuple[dict[str, Any], str]] = [
        ({"site": None}, "without the manifest's 'site' entry"),
        ({"site": {**good["site"], "settings": "site/other.json"}},  # type: ignore[dict-item]
         "site.settings"),
        ({"site": {**good["site"], "prefix": "opt"}}, "site.prefix"),  # type: ignore[dict-item]
        ({"site": {**good["site"], "extra": 1}}, "site.extra"),  # type: ignore[dict-item]
        ({"components": [{**good["components"][0], "kind": "docs"}]},  # type: ignore[index]
         "not a member of a site component"),
    ]
    for change, words in cases:
        body = {**good, **change}
        with pytest.raises(FormatError, match=words):
            parse_manifest(json.dumps(body).encode())
    # a site component may not own members outside site/
    bad = manifest_for([("sbom.cdx.json", b"{}"), ("docs/x", b"x"),
                        ("site/settings.json", settings)])
    bad["components"] = [{"kind": "site", "name": "p", "version": None, "licence": None,
                          "source": None, "members": ["docs/x", "site/settings.json"]}]
    bad["site"] = good["site"]
    with pytest.raises(FormatError, match="not under site/"):
        parse_manifest(json.dumps(bad).encode())
    forged = forge(tmp_path / "f.abhed", good, members, [key])
    assert inspect_bundle(forged).settings == settings


def test_a_bundle_without_settings_writes_no_site_key(built: Path) -> None:
    info = inspect_bundle(built)
    assert info.manifest.site is None and info.settings is None
    from bundle._tar import TarReader
    from bundle._verify import open_bundle_file, read_head

    with open_bundle_file(built) as f:
        raw, _ = read_head(TarReader(f, label="x"))
    assert b'"site"' not in raw  # older verifiers still read it


def test_diff_shows_the_policy_change_not_the_release_directory(tmp_path: Path,
                                                                key: SecretKey) -> None:
    a = _build(tmp_path, key, "a", version=3)
    tighter = json.loads(json.dumps(SETTINGS))
    tighter["policy"]["mode"] = "plan"
    b = _build(tmp_path, key, "b", version=4, settings=tighter)
    lines = diff_settings(inspect_bundle(a), inspect_bundle(b), old_label="a", new_label="b")
    assert lines[:2] == ["--- a", "+++ b"]
    changed = [ln for ln in lines if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]
    assert changed == ['-    "mode": "ask"', '+    "mode": "plan"']
    assert diff_settings(inspect_bundle(a), inspect_bundle(a)) == []


def test_inspect_and_diff_through_the_cli(tmp_path: Path, key: SecretKey) -> None:
    a = _build(tmp_path, key, "a", version=3)
    none = _build(tmp_path, key, "n", version=4, settings={}, files=[])
    pub = tmp_path / "k.pub"
    pub.write_text(key.public_key().to_text())
    runner = CliRunner()
    r = runner.invoke(bundle_group, ["inspect", str(a), "--trust", str(pub)])
    assert r.exit_code == 0, r.output
    assert "site settings: site plant-7, for prefix /opt/abhed, site/settings.json (sha256 " \
        in r.output
    assert '      "program": "curl",' in r.output
    r = runner.invoke(bundle_group, ["inspect", str(a), "--json"])
    assert json.loads(r.output)["settings"]["policy"]["mode"] == "ask"
    r = runner.invoke(bundle_group, ["diff", str(a), str(none)])
    assert r.exit_code == 0, r.output
    assert "site settings: changed" in r.output and '-    "mode": "ask"' in r.output
    # what loosened, by the agent's own narrowing rules: the deny rule went; the extension
    # and the provider changed (no more or less in them: read the diff)
    summary = r.output.splitlines()[-1]
    assert summary.startswith("site settings: LOOSER: tools.ignore; policy.deny")
    assert "| changed: " in summary and "extensions" in summary.split("| changed: ")[1]
    tighter = json.loads(json.dumps(SETTINGS))
    tighter["policy"]["mode"] = "plan"
    b = _build(tmp_path, key, "b", version=5, settings=tighter)
    r = runner.invoke(bundle_group, ["diff", str(a), str(b)])
    assert r.output.splitlines()[-1] == 'site settings: tighter: policy.mode ("ask" -> "plan")'
    r = runner.invoke(bundle_group, ["diff", str(b), str(a)])
    assert r.output.splitlines()[-1] == 'site settings: LOOSER: policy.mode ("plan" -> "ask")'

    r = runner.invoke(bundle_group, ["diff", str(a), str(a), "--json"])
    assert json.loads(r.output)["settings_diff"] == []
    r = runner.invoke(bundle_group, ["build", str(_spec(tmp_path / "c", settings={"x": 1})),
                                     "--out", str(tmp_path / "c.abhed"), "--key",
                                     str(_key_file(tmp_path, key))])
    assert r.exit_code == 1 and "x: unknown key: refused" in r.output


def _key_file(tmp_path: Path, key: SecretKey) -> Path:
    path = tmp_path / "k.key"
    path.write_text(key.to_text())
    return path
