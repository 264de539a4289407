"""Finding the site layer: only where root put it, every path component checked, fail closed.

Real files, real ownership and a real unprivileged user (setpriv, as the shared-host
event-log tests do); the host link's place is a module constant pointed at a
temporary directory in-process, so the real /etc is never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from appliance.assembly import _site_layer as site_module
from appliance.compose import SiteRefused, find_site, load_config
from appliance.events import EventStore
from tests.appliance.compose.site_files import write_site
from tests.helpers import shared_scratch

ENGINEER = 1001
REPO = Path(__file__).resolve().parents[3]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="ownership tests chown files (CI is root)")


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A directory an unprivileged user can pass through (pytest's is 0700)."""
    with shared_scratch("abhed-site-") as base:
        yield base


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private stand-in for /etc/abhed (HOST_SITE points in it), and a venv with no link."""
    etc = tmp_path / "etc-abhed"
    etc.mkdir(mode=0o755)
    monkeypatch.setattr(site_module, "HOST_SITE", etc / "site")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("PATH", os.environ["PATH"])  # a site layer resets it: put it back after
    yield etc


def test_no_site_anywhere_is_a_development_checkout(host: Path) -> None:
    assert find_site() is None
    assert load_config()._layered.site is None


def test_the_host_link_is_found_and_vouched_for(host: Path, tmp_path: Path) -> None:
    release = write_site(tmp_path / "opt" / "releases" / "1.0" / "site")
    (host / "site").symlink_to(release)
    found = find_site()
    assert found is not None and found.directory == release
    assert found.origin.release == "1.0" and found.settings.loop.max_turns == 30
    assert found.settings_file == host / "site" / "settings.json"
    config = load_config()
    assert config.loop.max_turns == 30 and config.source_of("loop.max_turns") == str(found.settings_file)


def test_the_host_link_wins_over_the_venvs(host: Path, tmp_path: Path) -> None:
    new = write_site(tmp_path / "r2" / "site", {"loop": {"max_turns": 7}}, release="2.0")
    old = write_site(tmp_path / "r1" / "site", release="1.0")
    venv = tmp_path / "venv"
    venv.mkdir(mode=0o755)
    (venv / "abhed-site").symlink_to(old)
    found = find_site()
    assert found is not None and found.origin.release == "1.0"  # only the venv's link exists
    (host / "site").symlink_to(new)
    found = find_site()
    assert found is not None and found.origin.release == "2.0"


@root_only
@pytest.mark.parametrize("spoil, words", [
    (lambda d: os.chown(d / "settings.json", ENGINEER, ENGINEER), "owned by uid 1001, not root"),
    (lambda d: os.chmod(d / "settings.json", 0o666), "writable by group"),
    (lambda d: os.chmod(d, 0o775), "writable by group"),
    (lambda d: os.chown(d.parent, ENGINEER, ENGINEER), "owned by uid 1001"),
    (lambda d: os.chmod(d.parent, 0o757), "writable by others"),
    (lambda d: (d / "origin.json").unlink(), "origin.json is missing"),
    (lambda d: (d / "settings.json").write_text('{"policy": {"mode": "auto"}}\n'),
     "the settings were changed after the installer wrote them"),
    (lambda d: ((d / "settings.json").unlink(), (d / "settings.json").symlink_to(d / "origin.json")),
     "is not a regular file"),
    (lambda d: (d / "origin.json").write_text('{"format": "other"}'), "not a valid origin record"),
])
def test_a_broken_site_layer_refuses_to_start(host: Path, tmp_path: Path, spoil: Any,
                                              words: str) -> None:
    release = write_site(tmp_path / "opt" / "site")
    (host / "site").symlink_to(release)
    spoil(release)
    with pytest.raises(SiteRefused) as caught:
        find_site()
    text = str(caught.value)
    assert words in text and str(host / "site") in text and "abhed-installer" in text


@root_only
def test_settings_that_do_not_validate_are_refused_naming_the_key(host: Path, tmp_path: Path) -> None:
    release = write_site(tmp_path / "opt" / "site", {"policy": {"mdoe": "ask"}})
    (host / "site").symlink_to(release)
    with pytest.raises(SiteRefused, match=r"policy\.mdoe"):
        find_site()


@root_only
@pytest.mark.parametrize("name", ["settings.json", "origin.json"])
def test_a_duplicate_key_in_either_file_refuses(host: Path, tmp_path: Path, name: str) -> None:
    # Two readers (the agent, abhed-installer status) could see different values: both read
    # the site's files through foundation.site_files, which refuses the second key.
    release = write_site(tmp_path / "opt" / "site")
    text = (release / name).read_text().strip()
    doubled = text[:-1] + (', "site": "other"}' if name == "origin.json" else ', "loop": {}}')
    (release / name).write_text(doubled)
    if name == "settings.json":  # the digest must still match, or that refusal comes first
        write_site(release, digest=hashlib.sha256(doubled.encode()).hexdigest())
        (release / name).write_text(doubled)
    (host / "site").symlink_to(release)
    with pytest.raises(SiteRefused, match="duplicate key"):
        find_site()


def test_a_link_to_nowhere_refuses(host: Path, tmp_path: Path) -> None:
    (host / "site").symlink_to(tmp_path / "opt" / "current" / "site")  # before the first switch
    with pytest.raises(SiteRefused, match="does not exist"):
        find_site()


def _as_engineer(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", f"--reuid={ENGINEER}", f"--regid={ENGINEER}", "--clear-groups",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def _find_as_engineer(host_site: Path) -> subprocess.CompletedProcess[str]:
    """find_site() in the engineer's own process, the host link at ``host_site``; exit 3: refused."""
    return _as_engineer("import sys; from appliance.assembly import _site_layer as _site, find_site, SiteRefused\n"
                        "from pathlib import Path\n"
                        f"_site.HOST_SITE = Path({str(host_site)!r})\n"
                        "try:\n    find_site()\nexcept SiteRefused as exc:\n"
                        "    print(exc); sys.exit(3)\n")


@root_only
def test_a_site_an_engineer_planted_is_refused(host: Path, tmp_path: Path) -> None:
    # The engineer owns a directory on the way (a home, a scratch dir): everything in it
    # is theirs to rewrite, so nothing in it can be the site's word, however it looks.
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, ENGINEER, ENGINEER)
    planted = _as_engineer(
        "import sys; sys.path.insert(0, 'tests/appliance/compose');"
        "from pathlib import Path; from site_files import write_site;"
        f"write_site(Path({str(theirs / 'site')!r}), {{'policy': {{'mode': 'auto'}}}})")
    assert planted.returncode == 0, planted.stderr
    assert (theirs / "site" / "settings.json").stat().st_uid == ENGINEER
    (host / "site").symlink_to(theirs / "site")
    with pytest.raises(SiteRefused, match="owned by uid 1001"):
        find_site()


@root_only
def test_an_unreadable_site_refuses_the_engineer_with_the_fix(host: Path, tmp_path: Path) -> None:
    release = write_site(tmp_path / "opt" / "site")
    os.chmod(release / "settings.json", 0o600)
    (host / "site").symlink_to(release)
    out = _find_as_engineer(host / "site")
    assert out.returncode == 3, out.stderr
    assert "cannot be read by this user" in out.stdout and "0644" in out.stdout


def test_every_door_refuses_before_anything_starts(host: Path, tmp_path: Path,
                                                   abhed_home: Path, workspace: Path) -> None:
    from cli import main

    (host / "site").symlink_to(tmp_path / "nowhere")
    for argv in (["run", "hi", "-w", str(workspace)], ["tool", "glob", '{"pattern": "*"}', "-w",
                 str(workspace)], ["config", "show"], ["rpc"]):
        out = CliRunner().invoke(main, argv, input="")
        assert out.exit_code == 2, (argv, out.output)
        assert "site layer" in out.output and "abhed-installer" in out.output
    db = abhed_home / "state" / "events.db"
    assert not db.exists() or EventStore(db).sessions() == []


@root_only
def test_a_site_this_user_cannot_look_into_refuses(host: Path, tmp_path: Path) -> None:
    # "Cannot see it" is not "not there": answering "no site" here would fail open.
    release = write_site(tmp_path / "opt" / "site")
    (host / "site").symlink_to(release)
    os.chmod(host, 0o700)
    out = _find_as_engineer(host / "site")
    assert out.returncode == 3, out.stderr
    assert "cannot be examined by this user" in out.stdout


def test_each_session_records_what_governed_it_and_the_auditor_lists_it(
        host: Path, tmp_path: Path, workspace: Path) -> None:
    from appliance import events_db_path
    from appliance.compose import layers_of
    from appliance.events.maintenance import export_log
    from cli import main
    from tests.appliance.events.auditor import auditor_run

    def tool() -> str:
        out = CliRunner().invoke(main, ["tool", "glob", '{"pattern": "*"}', "-w", str(workspace)])
        assert out.exit_code == 0, out.output
        return out.output.split("session: ")[1].split()[0]

    bare = tool()  # a development checkout: no site
    release = write_site(tmp_path / "opt" / "site")
    (host / "site").symlink_to(release)
    governed = tool()
    effective = layers_of(load_config()).digest
    site_sha = json.loads((release / "origin.json").read_text())["settings_sha256"]
    store = EventStore(events_db_path())
    started = {e.event.session_id: e.event.settings for e in store.events(types=("session_started",))}
    assert started[bare]["site"] == "none" and started[bare]["site_settings_sha256"] == "none"
    assert started[governed]["site"] == "lab" and started[governed]["release"] == "1.0"
    assert started[governed]["signing_key_ids"] == ["RWQkey1"]
    assert started[governed]["bundle_manifest_sha256"] == "c" * 64
    assert started[governed]["site_settings_sha256"] == site_sha
    assert started[governed]["effective_settings_sha256"] == effective
    export_log(store, tmp_path / "audit.jsonl")
    listed = {line.split()[0]: line for line in auditor_run(tmp_path / "audit.jsonl")[1:]}
    assert f"site=lab release=1.0 site_settings={site_sha} effective={effective}" in listed[governed]
    assert "site=none release=none" in listed[bare]


def test_under_a_site_programs_come_from_the_system_not_the_engineers_path(
        host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}/mine:{os.environ['PATH']}")
    load_config()
    assert f"{tmp_path}/mine" in os.environ["PATH"]  # a development checkout: untouched
    release = write_site(tmp_path / "opt" / "releases" / "3" / "site")
    (host / "site").symlink_to(release)
    config = load_config()
    assert os.environ["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    # ... and the microVM image is the release's own, not ABHED_HOME/image.
    assert config.sandbox.image_dir == str(tmp_path / "opt" / "releases" / "3" / "image")
