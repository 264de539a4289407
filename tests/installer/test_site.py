"""The site layer with the built binary: a bundle's signed agent settings installed with the
release, root-owned and read-only; the host link and the PATH link; switched with the code
by upgrade and rollback (read through the host link, across a fault injected between
steps); digests in the audit chain; ``status``; ``check`` finding every kind of change and
``repair`` putting it back; a bundle without settings refused over one with them.

One prefix serves the module (each real install builds a venv); each step asserts its own
behaviour.  The links go to a temporary directory (``--host-link``/``--bin-link``), never
the host's /etc or /usr/local/bin.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bundle import inspect_bundle, release_paths

from .conftest import BundleMaker, Installer, Keys, site_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def host(installer_bin: list[str], tmp_path_factory: pytest.TempPathFactory) -> Installer:
    d = tmp_path_factory.mktemp("sitehost")
    (d / "sysroot/etc").mkdir(parents=True)
    return Installer(installer_bin, d / "opt-abhed", d / "sysroot")


def _links(host: Installer) -> tuple[Path, Path]:
    return host.sysroot / "etc/abhed/site", host.sysroot / "usr/local/bin/abhed"


def _bundle(make_bundle: BundleMaker, host: Installer, version: int, mode: str = "ask",
            **kw: object) -> Path:
    return make_bundle(version, site=site_settings(mode), prefix=host.prefix, **kw)


def _member(bundle: Path) -> bytes:
    settings = inspect_bundle(bundle).settings
    assert settings is not None
    return settings


def _run_of(host: Installer) -> str:
    return str(host.audit()[-1]["run"])


def _through_host_link(host: Installer) -> dict[str, object]:
    return json.loads((_links(host)[0] / "settings.json").read_bytes())


def test_0_a_failed_first_install_leaves_no_link_behind(host: Installer, make_bundle: BundleMaker,
                                                        keys: Keys) -> None:
    site_link, bin_link = _links(host)
    r = host("install", _bundle(make_bundle, host, 1), "--trust", keys.pub, "--host-link",
             site_link, "--bin-link", bin_link, "--skip-gate", fault="state")
    assert r.returncode == 6, r.stdout + r.stderr
    last = host.audit()[-1]
    assert "restored the host and PATH links" in last["undone"]
    assert not os.path.lexists(site_link) and not os.path.lexists(bin_link)
    assert not os.path.lexists(host.prefix / "current")
    made = next(e for e in reversed(host.audit()) if e["step"] == "links")
    assert {c["path"] for c in made["changed"]} == {str(site_link), str(bin_link)}


def test_1_install_puts_the_settings_in_the_release_root_owned(
        host: Installer, make_bundle: BundleMaker, keys: Keys) -> None:
    site_link, bin_link = _links(host)
    bundle = _bundle(make_bundle, host, 1)
    r = host("install", bundle, "--trust", keys.pub, "--host-link", site_link,
             "--bin-link", bin_link)
    assert r.returncode == 0, r.stdout + r.stderr
    rel = host.prefix / "releases/1"
    settings = rel / "site/settings.json"
    digest = hashlib.sha256(_member(bundle)).hexdigest()
    assert settings.read_bytes() == _member(bundle)  # byte-identical to the signed member
    assert f"site settings: sha256 {digest} ({site_link} -> {host.prefix}/current/site)" \
        in r.stdout
    for path, mode in ((rel / "site", 0o755), (settings, 0o644), (rel / "site/origin.json", 0o644)):
        st = path.lstat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, mode), path
    origin = json.loads((rel / "site/origin.json").read_text())
    info = inspect_bundle(bundle)
    assert origin == {"format": "abhed-site-origin/1", "site": "plant-7", "release": "1",
                      "bundle_manifest_sha256": info.manifest_sha256,
                      "signing_key_ids": [keys.secret.public_key().id_hex],
                      "settings_sha256": digest}
    # every copy of abhed finds them through current: the venv's link and the host link
    assert os.readlink(rel / "venv/abhed-site") == f"{host.prefix}/current/site"
    assert os.readlink(site_link) == f"{host.prefix}/current/site"
    assert _through_host_link(host)["policy"] == json.loads(_member(bundle))["policy"]
    # what the settings name are real files of this release
    named = release_paths(json.loads(settings.read_bytes()), str(rel))
    assert f"{rel}/bundle/models/tiny/catalog.json" in named
    assert f"{rel}/bundle/site/files/veto.py" in named and f"{rel}/venv/bin/python" in named
    assert all(Path(p).exists() for p in named)
    # abhed on engineers' PATH
    assert os.readlink(bin_link) == f"{host.prefix}/bin/abhed"
    out = subprocess.run(["abhed", "--help"], capture_output=True, text=True, timeout=120,
                         env={"PATH": f"{bin_link.parent}:/usr/bin:/bin",
                              "PYTHONDONTWRITEBYTECODE": "1"})  # root would write caches
    assert out.returncode == 0 and "tool" in out.stdout
    # the digest is in the audit chain
    steps = {(e["step"], e["result"]): e for e in host.audit() if e.get("run") == _run_of(host)}
    assert steps[("site", "ok")]["settings_sha256"] == digest
    # the gate ran where this release was current, in private namespaces
    assert steps[("gate", "ok")]["isolated"] is True
    assert "in private mount and network namespaces where release 1 is current" in r.stderr
    assert steps[("done", "ok")]["site_settings_sha256"] == digest
    assert {c["path"] for c in steps[("links", "ok")]["changed"]} == {str(site_link), str(bin_link)}


def test_2_status_shows_the_settings_in_force_and_check_is_clean(host: Installer,
                                                                 make_bundle: BundleMaker) -> None:
    digest = hashlib.sha256(_member(_bundle(make_bundle, host, 1))).hexdigest()
    r = host("status")
    assert r.returncode == 0, r.stderr
    assert f"site settings: sha256 {digest} (site plant-7, release 1)" in r.stdout
    assert f"on engineers' PATH: {_links(host)[1]}" in r.stdout
    s = json.loads(host("status", "--json").stdout)["site"]
    assert (s["settings_sha256"], s["signed_sha256"], s["problems"]) == (digest, digest, [])
    r = host("check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_3_a_bundle_for_another_prefix_or_without_settings_is_refused(
        host: Installer, make_bundle: BundleMaker, tmp_path: Path) -> None:
    other = make_bundle(2, site=site_settings(), prefix=tmp_path / "elsewhere")
    r = host("upgrade", other)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "site_prefix" in r.stderr and "--prefix" in r.stderr
    r = host("upgrade", make_bundle(2))  # no [agent] table: would drop the site layer
    assert r.returncode == 2 and "--drop-site-layer" in r.stderr, r.stderr
    assert os.readlink(host.prefix / "current") == "releases/1"
    assert host.audit()[-1]["step"] in ("site", "preflight")


def test_4_upgrade_switches_the_settings_with_the_code(host: Installer,
                                                       make_bundle: BundleMaker) -> None:
    bundle = _bundle(make_bundle, host, 2, mode="plan")
    r = host("upgrade", bundle)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _through_host_link(host)["policy"]["mode"] == "plan"  # type: ignore[index]
    assert (host.prefix / "current/site/settings.json").read_bytes() == _member(bundle)
    done = host.audit()[-1]
    assert done["step"] == "done"
    assert done["site_settings_sha256"] == hashlib.sha256(_member(bundle)).hexdigest()
    # the older release's own binary, run directly, still finds the current settings
    assert os.readlink(host.prefix / "releases/1/venv/abhed-site") == \
        f"{host.prefix}/current/site"


@pytest.mark.parametrize("fault", ["switch", "links", "state"])
def test_5_a_fault_between_steps_leaves_the_settings_in_force(host: Installer,
                                                              make_bundle: BundleMaker,
                                                              fault: str) -> None:
    before = _through_host_link(host)
    r = host("upgrade", _bundle(make_bundle, host, 3, mode="auto"), "--skip-gate", fault=fault)
    assert r.returncode == 6, r.stdout + r.stderr
    assert _through_host_link(host) == before
    assert os.readlink(host.prefix / "current") == "releases/2"
    assert not (host.prefix / "releases/3").exists()
    last = host.audit()[-1]
    assert (last["step"], last["result"]) == ("restore", "ok")
    assert "removed releases/3" in last["undone"]
    assert host("check").returncode == 0


def test_6_rollback_brings_the_older_settings_back(host: Installer,
                                                   make_bundle: BundleMaker) -> None:
    r = host("rollback", "--skip-gate")
    assert r.returncode == 0, r.stdout + r.stderr
    v1 = _member(_bundle(make_bundle, host, 1))
    assert _through_host_link(host) == json.loads(v1)
    assert f"site settings: sha256 {hashlib.sha256(v1).hexdigest()}" in r.stdout
    done = host.audit()[-1]
    assert (done["action"], done["step"]) == ("rollback", "done")
    assert done["site_settings_sha256"] == hashlib.sha256(v1).hexdigest()


def _change(host: Installer, change: str) -> str:
    """Make one change to the site layer; the path ``check`` must name for it."""
    rel = host.prefix / "releases/1"
    settings = rel / "site/settings.json"
    site_link, bin_link = _links(host)
    if change == "edit":
        settings.write_text(settings.read_text().replace('"ask"', '"auto"'))
    elif change == "replace":  # by a link to a file of someone else's
        fake = rel.parent / "mine.json"
        fake.write_text("{}\n")
        settings.unlink()
        os.symlink(fake, settings)
    elif change == "chown":
        os.chown(settings, 1000, 1000)
    elif change == "chmod":
        os.chmod(settings, 0o666)
    elif change == "remove":
        settings.unlink()
    elif change == "origin":
        (rel / "site/origin.json").write_text("{}\n")
        return "site/origin.json"
    elif change == "dir-chmod":
        os.chmod(rel / "site", 0o777)
        return "site/: mode 0o777"
    elif change == "venv-link":
        (rel / "venv/abhed-site").unlink()
        os.symlink("/tmp", rel / "venv/abhed-site")
        return "venv/abhed-site"
    elif change == "host-link":
        site_link.unlink()
        return f"host link {site_link}: missing"
    elif change == "bin-link":
        bin_link.unlink()
        os.symlink("/usr/bin/true", bin_link)
        return f"PATH link {bin_link}: -> /usr/bin/true"
    return "site/settings.json"


@pytest.mark.parametrize("changes", [
    ("edit", "origin", "dir-chmod", "venv-link", "host-link", "bin-link"),
    ("replace",), ("chown",), ("chmod",), ("remove",),
])
def test_7_check_finds_a_changed_site_file_or_link_and_repair_puts_it_back(
        host: Installer, changes: tuple[str, ...]) -> None:
    named = [_change(host, c) for c in changes]
    r = host("check", "--json")
    assert r.returncode == 8, r.stdout
    report = json.loads(r.stdout)
    found = "\n".join(report["added"] + report["missing"] + report["problems"]
                      + [f"{a['path']}: {a['why']}" for a in report["altered"]])
    for what in named:
        assert what in found, (what, found)
    if changes == ("chown",):
        assert "owner 1000:1000, expected 0:0" in found
    assert report["site_layer_ok"] is False
    assert "abhed-installer repair" in r.stderr
    r = host("repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.audit()[-1]["action"] == "repair"
    r = host("check")
    assert r.returncode == 0, r.stdout + r.stderr
    rel = host.prefix / "releases/1"
    assert (rel / "site/settings.json").read_bytes() == \
        (rel / "bundle/site/settings.json").read_bytes()


def _settings(host: Installer) -> dict[str, Any]:
    return json.loads((host.prefix / "current/site/settings.json").read_bytes())


def test_8_the_operator_may_only_narrow_the_signed_settings_on_the_host(
        host: Installer, tmp_path: Path) -> None:
    signed = (host.prefix / "current/bundle/site/settings.json").read_bytes()
    tight = tmp_path / "tight.json"
    tight.write_text('{"policy": {"mode": "plan"}, "loop": {"max_turns": 30}}')
    r = host("site", "tighten", tight)
    assert r.returncode == 0, r.stdout + r.stderr
    settings = _settings(host)
    assert (settings["policy"]["mode"], settings["loop"]["max_turns"]) == ("plan", 30)
    assert settings["policy"]["deny"] == json.loads(signed)["policy"]["deny"]  # kept
    now = hashlib.sha256((host.prefix / "current/site/settings.json").read_bytes()).hexdigest()
    origin = json.loads((host.prefix / "current/site/origin.json").read_text())
    assert origin["settings_sha256"] == now  # the agent holds settings.json to it
    entry = host.audit()[-1]
    assert (entry["action"], entry["step"]) == ("site", "tighten")
    assert entry["settings_sha256"] == now
    assert entry["signed_sha256"] == hashlib.sha256(signed).hexdigest()
    assert "overlay_sha256" in entry
    # not a change to check, and status says so
    r = host("check")
    assert r.returncode == 0, r.stdout + r.stderr
    r = host("status")
    assert f"site settings: sha256 {now}" in r.stdout and "tightened on this host" in r.stdout
    # a loosening of the signed settings is refused by the release's own abhed, named
    for loose, words in (('{"policy": {"mode": "auto"}}', "policy.mode"),
                         ('{"loop": {"max_turns": 999}}', "loop.max_turns"),
                         ('{"custom_providers": [{"name": "mine", "api": "openai", '
                          '"base_url": "http://10.0.0.1/v1"}]}', "custom_providers")):
        f = tmp_path / "loose.json"
        f.write_text(loose)
        r = host("site", "tighten", f)
        assert r.returncode == 2, r.stdout + r.stderr
        assert words in r.stderr and "only a new signed bundle" in r.stderr
        assert host.audit()[-1]["result"] == "refused"
    assert _settings(host) == settings
    # hostile files are refused by name before anything runs
    (tmp_path / "big.json").write_text('{"x": "' + "y" * 300_000 + '"}')
    (tmp_path / "bad.json").write_text("{nope")
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("big.json", "bad.json", "fifo.json", "missing.json"):
        r = host("site", "tighten", tmp_path / name, timeout=60)
        assert r.returncode == 2, (name, r.stderr)
    r = host("site", "tighten", tmp_path / "bad.json")
    assert "not valid JSON" in r.stderr
    # the same tightening again changes nothing, and says so
    r = host("site", "tighten", tight)
    assert r.returncode == 0 and "nothing changed" in r.stdout
    # repair puts the tightened settings back, not the signed ones
    f = host.prefix / "current/site/settings.json"
    f.write_text(f.read_text().replace('"plan"', '"auto"'))
    assert host("check").returncode == 8
    assert host("repair").returncode == 0
    assert _settings(host) == settings and host("check").returncode == 0


def test_9_an_upgrade_carries_the_tightening_only_while_it_still_narrows(
        host: Installer, make_bundle: BundleMaker) -> None:
    # release 3's signed settings allow 40 turns: the host's 30 still narrows them
    r = host("upgrade", make_bundle(3, site=site_settings(max_turns=40), prefix=host.prefix),
             "--skip-gate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tightening of release 1 carried over" in r.stderr
    settings = _settings(host)
    assert (settings["policy"]["mode"], settings["loop"]["max_turns"]) == ("plan", 30)
    site = next(e for e in reversed(host.audit()) if e["step"] == "site")
    assert site["local_from"] == 1 and site["settings_sha256"] == hashlib.sha256(
        (host.prefix / "current/site/settings.json").read_bytes()).hexdigest()
    assert host("check").returncode == 0
    # release 4's allow 20: the host's 30 would loosen them; the upgrade stops, nothing switched
    four = make_bundle(4, site=site_settings(max_turns=20), prefix=host.prefix)
    r = host("upgrade", four, "--skip-gate")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "loop.max_turns" in r.stderr and "--drop-local-settings" in r.stderr
    assert os.readlink(host.prefix / "current") == "releases/3"
    assert not (host.prefix / "releases/4").exists()
    assert not (host.prefix / "state/site-local/4").exists()
    r = host("upgrade", four, "--skip-gate", "--drop-local-settings")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _settings(host)["loop"]["max_turns"] == 20  # the signed settings
    site = next(e for e in reversed(host.audit()) if e["step"] == "site")
    assert site["local_dropped_from"] == 3
    # and reset goes back to the signed settings after a tightening
    host("rollback", "--to", "3", "--skip-gate")
    r = host("site", "reset")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _settings(host)["loop"]["max_turns"] == 40
    assert host.audit()[-1]["step"] == "reset" and host("check").returncode == 0
    assert host("site", "reset").stdout.endswith("nothing changed\n")


def test_99_uninstall_removes_the_links(host: Installer) -> None:
    r = host("uninstall", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    site_link, bin_link = _links(host)
    assert not os.path.lexists(site_link) and not os.path.lexists(bin_link)
    assert host.audit()[-1]["action"] == "uninstall"
