"""A shared host, for real: the built installer puts a release with site settings in a
temporary prefix, and three real Unix users (setpriv, as the event-log shared-host tests do)
use it at once against one model server.

Each engineer's sessions run under the site's policy with nothing of their own configured;
every loosening route is refused with the message that names it; none can read another's
sessions, artifacts or events; the witness collects every engineer's heads; an upgrade that
tightens the policy governs each engineer's next session, and a rollback brings the older
policy back, each session recording which release and settings governed it.

The model server is the scripted one (models.scripted, a real HTTP server on 127.0.0.1),
not vLLM: the scenario needs every engineer's model to read a given file and answer, on cue,
for a dozen sessions; the tiny vLLM model's random weights cannot be steered to that, and
each of its sessions would cost minutes. How one vLLM serves N engineers at once is
measured in benchmarks/site/concurrent_sessions.py.  Installs, the upgrade and the rollback
skip the health gate: the site's provider here is that scripted server, on a port of the
test's choosing, and the gate (which serves the release's own model on the service's port in
a private network namespace) is tested with site settings in tests/installer/test_site.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from models.scripted import ScriptedServer, ScriptStep
from tests.helpers import shared_scratch

from .conftest import BundleMaker, Installer, Keys

ENGINEERS = (1001, 1002, 1004)
WITNESS_UID = 1003

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="real users and an install need root")]


def _reply(body: dict[str, Any]) -> ScriptStep:
    """Every engineer's model: read the file the prompt names in backticks, then answer."""
    msgs = body["messages"]
    if not any(m["role"] == "tool" for m in msgs):
        path = next(m["content"] for m in msgs if m["role"] == "user").split("`")[1]
        return ScriptStep(tool_calls=[{"name": "read", "arguments": {"path": path}}])  # type: ignore[list-item]
    return ScriptStep(text="It says: " + msgs[-1]["content"].split("\t", 1)[-1][:40])


@dataclass
class Host:
    base: Path
    installer: Installer
    server: ScriptedServer
    witness: Path
    homes: dict[int, Path]
    spaces: dict[int, Path]

    @property
    def abhed(self) -> Path:
        return self.installer.prefix / "bin" / "abhed"

    def settings(self, mode: str, max_turns: int) -> dict[str, Any]:
        return {"custom_providers": [{"name": "site", "api": "openai", "model": "scripted",
                                      "base_url": self.server.base_url, "max_retries": 0}],
                "policy": {"mode": mode, "deny": [{"tool": "read", "path": "**/forbidden*",
                                                   "reason": "not for the agent"}]},
                "sandbox": {"backend": "bwrap"},
                "events": {"witness_dir": str(self.witness), "redact": ["secret-[a-z0-9]+"],
                           "reserve_mb": 1},
                "loop": {"max_turns": max_turns}}

    def run(self, uid: int, *argv: str, home: Path | None = None, env: dict[str, str] | None = None,
            program: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``abhed ARGV`` as engineer ``uid`` (their home, their ABHED_HOME unless told)."""
        base_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.homes[uid]),
                    "ABHED_HOME": str(home or self.homes[uid] / ".abhed"), "LANG": "C.UTF-8"}
        return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                               str(program or self.abhed), *argv],
                              env={**base_env, **(env or {})}, capture_output=True, text=True,
                              timeout=300, check=False, cwd=self.spaces[uid])

    def ask(self, uid: int, *flags: str) -> dict[str, Any]:
        """One session: the engineer asks about their notes; returns its session_started event."""
        ws = self.spaces[uid]
        done = self.run(uid, "run", f"What does `{ws / 'notes.txt'}` say?", "-w", str(ws), "--json",
                        *flags)
        assert done.returncode == 0, done.stderr
        events = [json.loads(line)["event"] for line in done.stdout.splitlines()]
        assert any(e["type"] == "observation" and e["result"]["ok"] for e in events), done.stdout
        return next(e for e in events if e["type"] == "session_started")


def _mkdir(path: Path, uid: int, mode: int) -> Path:
    path.mkdir()
    os.chown(path, uid, uid)
    os.chmod(path, mode)
    return path


@pytest.fixture(scope="module")
def host(installer_bin: list[str]) -> Iterator[Host]:
    # Engineers pass through it to the prefix, their homes and the witness.
    with shared_scratch("abhed-shared-") as base:
        (base / "sysroot/etc").mkdir(parents=True)
        witness = _mkdir(base / "witness", WITNESS_UID, 0o755)
        _mkdir(witness / "inbox", WITNESS_UID, 0o1733)
        _mkdir(witness / "heads", WITNESS_UID, 0o755)
        homes = {uid: _mkdir(base / f"home-{uid}", uid, 0o700) for uid in ENGINEERS}
        spaces = {uid: _mkdir(base / f"ws-{uid}", uid, 0o755) for uid in ENGINEERS}
        for uid, ws in spaces.items():
            for name, text in (("notes.txt", f"notes of {uid}: secret-{uid}abc\n"),
                               ("forbidden.txt", "not for the agent\n")):
                (ws / name).write_text(text)
                os.chown(ws / name, uid, uid)
        with ScriptedServer(responder=_reply, model="scripted") as server:
            yield Host(base, Installer(installer_bin, base / "opt-abhed", base / "sysroot"),
                       server, witness, homes, spaces)


def _install(host: Host, make_bundle: BundleMaker, keys: Keys, version: int, mode: str,
             max_turns: int, verb: str = "install") -> None:
    bundle = make_bundle(version, site=host.settings(mode, max_turns), prefix=host.installer.prefix)
    done = host.installer(verb, bundle, "--trust", keys.pub, "--skip-gate",
                          "--host-link", host.base / "sysroot/etc/abhed/site",
                          "--bin-link", host.base / "sysroot/usr/local/bin/abhed")
    assert done.returncode == 0, done.stdout + done.stderr


def test_1_three_engineers_at_once_under_the_sites_policy(host: Host, make_bundle: BundleMaker,
                                                          keys: Keys) -> None:
    _install(host, make_bundle, keys, 1, "ask", 20)
    started: dict[int, dict[str, Any]] = {}

    def one(uid: int) -> None:
        started[uid] = host.ask(uid)

    threads = [threading.Thread(target=one, args=(uid,)) for uid in ENGINEERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert sorted(started) == sorted(ENGINEERS)
    origin = json.loads((host.installer.prefix / "releases/1/site/origin.json").read_text())
    for uid, start in started.items():
        s = start["settings"]
        assert (s["site"], s["release"], s["site_settings_sha256"]) == \
            ("plant-7", "1", origin["settings_sha256"])
        assert s["mode"] == "ask" and s["bundle_manifest_sha256"] == origin["bundle_manifest_sha256"]
        # Nothing of their own configured: the site's provider, policy and record.
        assert not (host.homes[uid] / ".abhed" / "config.json").exists()
    # The site's redaction held: no engineer's secret is in their record.
    for uid in ENGINEERS:
        dump = host.run(uid, "sessions", "list", "--json")
        assert dump.returncode == 0, dump.stderr
        log = (host.homes[uid] / ".abhed/state/events.db").read_bytes()
        assert f"secret-{uid}abc".encode() not in log


LOOSENINGS: list[tuple[str, dict[str, Any], tuple[str, ...], str]] = [
    ("config.json", {"policy": {"mode": "auto"}}, (), "policy.mode"),
    ("config.json", {"policy": {"allow_looser_mode": True}}, (), "policy.allow_looser_mode"),
    ("config.json", {"policy": {"allow": [{"tool": "bash"}]}}, (), "policy.allow"),
    ("config.json", {"policy": {"deny": []}, "sandbox": {"backend": "host"}}, (), "sandbox.backend"),
    ("config.json", {"events": {"witness_dir": None}}, (), "events.witness_dir"),
    ("config.json", {"events": {"reserve_mb": 0}}, (), "events.reserve_mb"),
    ("config.json", {"mcp_servers": [{"name": "mine", "command": "/bin/true"}]}, (), "mcp_servers"),
    ("config.json", {"extensions": [{"name": "mine", "command": "/bin/true",
                                     "events": ["tool_call"]}]}, (), "extensions"),
    ("config.json", {"custom_providers": [{"name": "mine", "api": "openai",
                                           "base_url": "http://127.0.0.1:9/v1"}]}, (),
     "custom_providers"),
    ("config.json", {"loop": {"max_turns": 500}}, (), "loop.max_turns"),
    ("config.json", {"tools": {"secret_paths": ["!*.pem"]}}, (), "tools.secret_paths"),
    ("--config", {"sandbox": {"backend": "host"}}, (), "sandbox.backend"),
    ("ABHED_HOME", {"policy": {"mode": "auto"}}, (), "policy.mode"),
    ("flag", {}, ("--max-turns", "500"), "loop.max_turns"),
    ("flag", {}, ("--mode", "auto"), "policy.mode"),
]


@pytest.mark.parametrize("route, mine, flags, setting", LOOSENINGS)
def test_2_every_loosening_route_is_refused_with_its_name(host: Host, route: str,
                                                          mine: dict[str, Any],
                                                          flags: tuple[str, ...],
                                                          setting: str) -> None:
    uid = ENGINEERS[0]
    home: Path | None = None
    argv: list[str] = []
    target = host.homes[uid] / ".abhed" / "config.json"
    if route == "--config":
        target = host.homes[uid] / "mine.json"
        argv = ["--config", str(target)]
    elif route == "ABHED_HOME":
        home = host.homes[uid] / "elsewhere"
        home.mkdir(exist_ok=True)
        os.chown(home, uid, uid)
        target = home / "config.json"
    if mine:
        target.parent.mkdir(exist_ok=True)
        os.chown(target.parent, uid, uid)
        target.write_text(json.dumps(mine))
        os.chown(target, uid, uid)
    try:
        ws = host.spaces[uid]
        done = host.run(uid, "run", "hi", "-w", str(ws), *flags, *argv, home=home)
        assert done.returncode == 2, done.stdout + done.stderr
        assert setting in done.stderr and "Traceback" not in done.stderr
        if route != "flag":
            # Each refused setting is named with the site's value and the site's own file.
            assert "would loosen the site's policy" in done.stderr, done.stderr
            assert f"{setting}: " in done.stderr and "looser than the site's" in done.stderr
            assert "site/settings.json" in done.stderr, done.stderr
        elif setting != "policy.mode":
            assert "site" in done.stderr  # names the site's file or its setting
    finally:
        target.unlink(missing_ok=True)


def test_3_a_copy_of_the_venv_and_a_planted_site_are_refused(host: Host) -> None:
    uid = ENGINEERS[1]
    mine = host.homes[uid] / "venv"
    cp = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                         "cp", "-a", str(host.installer.prefix / "current/venv"), str(mine)],
                        capture_output=True, text=True, timeout=300, check=False)
    assert cp.returncode == 0, cp.stderr
    # The copy's abhed script still runs the release's own interpreter: governed as before.
    done = host.run(uid, "config", "show", program=mine / "bin" / "abhed")
    assert done.returncode == 0 and "# site 'plant-7', release 1" in done.stdout, done.stderr
    # The copy's own interpreter finds the copied link in a directory the engineer owns:
    # not the site's word, whatever it points at.
    done = host.run(uid, "-m", "cli", "config", "show", program=mine / "bin" / "python")
    assert done.returncode == 2 and f"owned by uid {uid}" in done.stderr, done.stderr
    # ... and with the link gone, a development checkout: what only /etc/abhed/site governs
    # (docs/configuration.md, "Where the site layer is a boundary").
    (mine / "abhed-site").unlink()
    done = host.run(uid, "-m", "cli", "config", "show", program=mine / "bin" / "python")
    assert done.returncode == 0 and "no site settings apply" in done.stdout


def test_4_no_engineer_can_read_anothers_record(host: Host) -> None:
    a, b = ENGINEERS[0], ENGINEERS[1]
    theirs = host.homes[a] / ".abhed"
    done = host.run(b, "sessions", "list", home=theirs)
    assert done.returncode != 0 and "Permission denied" in done.stderr
    for target in (theirs / "state/events.db", theirs / "state/artifacts"):
        peek = subprocess.run(["setpriv", f"--reuid={b}", f"--regid={b}", "--clear-groups",
                               "ls", str(target)], capture_output=True, text=True, check=False)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr


def test_5_the_witness_collects_every_engineers_heads(host: Host) -> None:
    done = subprocess.run(["setpriv", f"--reuid={WITNESS_UID}", f"--regid={WITNESS_UID}",
                           "--clear-groups", str(host.abhed), "events", "witness", "collect",
                           str(host.witness)],
                          env={"PATH": "/usr/bin:/bin", "HOME": str(host.witness),
                               "ABHED_HOME": str(host.witness / "home")},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for uid in ENGINEERS:
        heads = host.witness / "heads" / f"{uid}.jsonl"
        assert heads.exists() and heads.stat().st_uid == WITNESS_UID
        assert json.loads(heads.read_text().splitlines()[-1])["uid"] == uid


def test_6_an_upgrade_that_tightens_governs_the_next_session_and_a_rollback_restores(
        host: Host, make_bundle: BundleMaker, keys: Keys) -> None:
    _install(host, make_bundle, keys, 2, "plan", 5, verb="upgrade")
    v2 = json.loads((host.installer.prefix / "releases/2/site/origin.json").read_text())
    for uid in ENGINEERS:
        s = host.ask(uid)["settings"]
        assert (s["release"], s["mode"], s["site_settings_sha256"]) == \
            ("2", "plan", v2["settings_sha256"])
    # The tighter ceiling binds: what release 1 allowed is now refused.
    refused = host.run(ENGINEERS[0], "run", "hi", "-w", str(host.spaces[ENGINEERS[0]]),
                       "--max-turns", "10")
    assert refused.returncode == 2 and "loop.max_turns" in refused.stderr
    done = host.installer("rollback", "--skip-gate")
    assert done.returncode == 0, done.stdout + done.stderr
    v1 = json.loads((host.installer.prefix / "releases/1/site/origin.json").read_text())
    for uid in ENGINEERS:
        s = host.ask(uid, "--max-turns", "10")["settings"]
        assert (s["release"], s["mode"], s["site_settings_sha256"]) == \
            ("1", "ask", v1["settings_sha256"])
