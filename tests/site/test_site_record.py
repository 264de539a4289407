"""A site at work, then its audit: four engineers on two hosts, one model host, one join.

The engineers' ``abhed run`` sessions go, all at once, from their own hosts
through their host's relay to the model host's front, which attributes each
request, records it
(``models.RequestLog``) and passes it to real vLLM.  One engineer then tries
what a curious one would: the host's credential and another engineer's log
(unreadable), a call to the front with no credential (refused, and
recorded), a direct call through the relay as herself (answered, recorded).  The auditor collects the record and the four event logs and
runs ``abhed events join``: every agent request is matched to its turn, the
direct one and the refused one are listed, exit 1.

The model service is the real one (docs/model-service.md): the site CA's
credential on every host, ``abhed model-front`` on the model host (mutual
TLS, the host from the certificate) and ``abhed model-relay`` on each
engineer's host (the engineer from the socket's peer credentials), as the
installer's units run them.

Every host is installed as an operator installs it, from the site's one signed
bundle by the built installer (prefix ``/srv/abhed``, each in its own filesystem
view), after its credential.  The model host first: ``abhed-installer install
--role model``, whose gate runs real vLLM (the bundle's declared command is the
release's own Python as a trampoline to the cached vLLM CPU venv,
scripts/vllm-env, serving the wired tiny model, as tests/installer/test_real_vllm.py
declares it: vLLM and torch are gigabytes of wheels, never in a test bundle).  Then it
serves from that release: its model server unit (the release's run script, vLLM on
loopback behind the key only the front reads) and its front unit.  Then both
engineers' hosts at once: ``install --role agent``, so each host's health gate asks
the model service through the new release's own relay (recorded as the gate).  The
relays then run as the units the installer staged on each host say.  There is no
systemd here: the installer's ``ABHED_INSTALLER_SYSROOT`` is the host's own
``/srv/sysroot``, and the test starts each unit's ``ExecStart`` as written.  The
engineers work through their release's ``abhed`` and the site layer it linked at
``/etc/abhed/site``.  vLLM starts twice in this test: the model host's gate, then
its service.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from installer._services import DEFAULT_PORT, FRONT_UNIT, RELAY_SOCKET, RELAY_UNIT, UNIT_NAME
from models import GATE_ENGINEER, read_requests
from tests.appliance.events.ocsf_schema import ocsf_problems
from tests.helpers import ROOT, wait_for
from tests.site.conftest import MODEL_ENDPOINT, SiteBundle
from tests.site.harness import ENGINEERS, Site, SiteHost
from tests.site.model_service import (
    ABHED,
    PREFIX,
    RECORD,
    SYSROOT,
    SiteService,
    engineer_config,
    start_model_service,
    start_relays,
    start_staged,
)

pytestmark = pytest.mark.slow

PORT = 8443
RELEASE_ABHED = f"{PREFIX}/bin/abhed"  # the installed release's (the bin link's target)


def _curl(host: SiteHost, user: str, *how: str) -> subprocess.CompletedProcess[str]:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4})
    return host.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "120",
                     "-H", "content-type: application/json", "-d", body, *how], user=user)


def test_a_site_at_work_is_accounted_for_and_the_direct_call_flagged(
        site: Site, site_bundle: SiteBundle, tmp_path: Path) -> None:
    t0 = time.monotonic()
    model = site.hosts["model-1"]
    svc = start_model_service(site, model, tmp_path / "ca", relays=False)
    try:
        t1, cpu = time.monotonic(), _children_cpu_s()
        _install(model, svc, site_bundle, "model")
        _serve_from_release(site, svc, model)
        installs = (f"site: the model host installed (its gate on real vLLM) and serving in "
                    f"{time.monotonic() - t1:.1f} s ({_children_cpu_s() - cpu:.1f} s CPU)")
        t1, cpu = time.monotonic(), _children_cpu_s()
        _install_engineers_hosts(site, svc, site_bundle)
        installs += (f"; both engineers' hosts installed at once in "
                     f"{time.monotonic() - t1:.1f} s ({_children_cpu_s() - cpu:.1f} s CPU)")
        start_relays(site, svc)
        _work_then_audit(site, model, svc, tmp_path, t0)
        print(installs)
    finally:  # the site outlives this test (one per run): leave it as it was found
        for proc in svc.procs.values():
            site.stop(proc)
        for name in [model.name, *ENGINEERS]:
            _uninstalled(site.hosts[name])


def _serve_from_release(site: Site, svc: SiteService, model: SiteHost) -> None:
    """The model host's units as its release staged them: the model server (the release's
    run script: real vLLM on loopback, behind the key only the front reads), then the front
    before it, once vLLM answers."""
    server = start_staged(site, model, UNIT_NAME)
    svc.procs[f"{model.name}-vllm"] = server
    said: list[str] = []
    for pipe in (server.stdout, server.stderr):  # drained: vLLM logs every request
        threading.Thread(target=lambda p=pipe: said.extend(p), daemon=True).start()

    def healthy() -> bool:
        assert server.poll() is None, "".join(said)[-4000:]
        done = model.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time",
                          "2", f"http://127.0.0.1:{DEFAULT_PORT}/health"])
        return done.stdout == "200"

    wait_for(healthy, 900, poll_s=0.5, what="the release's vLLM on the model host")
    svc.procs[model.name] = start_staged(site, model, FRONT_UNIT)


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the installers, for the report)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _uninstalled(host: SiteHost) -> None:
    """What the install left on ``host`` removed: the host link, the staged units, the
    prefix (credentials included; the next site test issues its own)."""
    link = host.path("/etc/abhed/site")
    if link.is_symlink():
        link.unlink()
    shutil.rmtree(link, ignore_errors=True)
    for done in (PREFIX, SYSROOT):
        shutil.rmtree(host.path(done), ignore_errors=True)


def _install(host: SiteHost, svc: SiteService, bundle: SiteBundle, role: str,
             out: dict[str, subprocess.CompletedProcess[str]] | None = None) -> None:
    """The operator's install on ``host``, as root there: the bundle and the publisher's
    key carried to its /srv, ``--role ROLE``, the site layer linked at /etc/abhed/site
    (an agent host's; a model host has none).  Without ``out``: checked here."""
    for name, src in (("abhed-site-1.abhed", bundle.path), ("release.pub", bundle.trust)):
        shutil.copyfile(src, host.path(f"/srv/{name}"))
    host.path(f"{SYSROOT}/run/systemd/system").mkdir(parents=True)
    host.path(f"{SYSROOT}/etc").mkdir()
    args = ["install", "/srv/abhed-site-1.abhed", "--trust", "/srv/release.pub", "--role",
            role, "--prefix", PREFIX]
    if role == "agent":
        args += ["--host-link", "/etc/abhed/site"]
    r = host.run([*svc.installer, *args], timeout=1500, env={"ABHED_INSTALLER_SYSROOT": SYSROOT})
    if out is not None:
        out[host.name] = r
        return
    assert r.returncode == 0, f"{host.name}: {r.stdout}{r.stderr[-6000:]}"
    assert "role: model (no microVM image, no site settings)" in r.stdout, r.stdout
    assert "gate: healthy: /health 200, serving tiny" in r.stderr
    assert "gate: known answer: answered '5'" in r.stderr
    assert "gate: agent tool call: ok" in r.stderr
    assert "Application startup complete" in host.path(f"{PREFIX}/logs/gate-1-model.log").read_text()
    rel = host.path(f"{PREFIX}/releases/1")
    assert (rel / "bundle/models/tiny/config.json").is_file()
    assert not (rel / "site").exists() and not host.path("/etc/abhed/site").exists()
    for unit in (UNIT_NAME, FRONT_UNIT):
        assert host.path(f"{SYSROOT}/etc/systemd/system/{unit}").is_file()
    svc.outputs.append(f"root@{host.name}# abhed-installer install abhed-site-1.abhed --trust "
                       f"release.pub --role model --prefix {PREFIX}\n{r.stdout}{r.stderr}")


def _install_engineers_hosts(site: Site, svc: SiteService, bundle: SiteBundle) -> None:
    """Both engineers' hosts installed at once by the built installer (module doc)."""
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    threads = [threading.Thread(target=_install, args=(site.hosts[n], svc, bundle, "agent", done))
               for n in ENGINEERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ENGINEERS:
        host, r = site.hosts[name], done[name]
        assert r.returncode == 0, f"{name}: {r.stdout}{r.stderr[-6000:]}"
        assert f"role: agent (no weights, no vLLM, no model service here; the site's model " \
               f"service: {MODEL_ENDPOINT})" in r.stdout, r.stdout
        assert "network reaches the site's model endpoints only" in r.stderr
        assert f"through the release's model relay on {RELAY_SOCKET}" in r.stderr
        assert "agent tool call through the site's model service: ok" in r.stderr
        # the site layer is the release's, linked where every abhed on the host looks first
        link = host.path("/etc/abhed/site")
        assert link.is_symlink() and os.readlink(link) == f"{PREFIX}/current/site"
        assert (host.path(PREFIX) / "releases/1/site/settings.json").is_file()
        # what other roles install was verified, never unpacked here
        assert not list(host.path(PREFIX).rglob("weights.bin"))
        assert host.path(f"{SYSROOT}/etc/systemd/system/{RELAY_UNIT}").is_file()
        svc.outputs.append(f"root@{name}# abhed-installer install abhed-site-1.abhed --trust "
                           f"release.pub --role agent --prefix {PREFIX} --host-link "
                           f"/etc/abhed/site\n{r.stdout}{r.stderr}")


def _work_then_audit(site: Site, model: SiteHost, svc: SiteService, tmp_path: Path,
                     t0: float) -> None:
    engineers = [(site.hosts[h], u) for h, users in ENGINEERS.items() for u in users]
    for host, user in engineers:
        engineer_config(host, user)
    abhed = [sys.executable, "-m", "cli"]
    # All four at once, each on their own host as themselves, with the release's abhed
    # and nothing configured: the site layer the installer linked is theirs.
    runs = [(host, user, host.popen(
        [RELEASE_ABHED, "run", f"list the files in /home/{user}/ws", "--workspace",
         f"/home/{user}/ws", "--force-tool", "glob", "--json"], user=user,
        env={"ABHED_HOME": f"/home/{user}/.abhed"}))
        for host, user in engineers]
    sessions: dict[tuple[str, str], str] = {}
    for host, user, proc in runs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{user}@{host.name}: {err[-3000:]}"
        events = [json.loads(line)["event"] for line in out.splitlines()]
        start = events[0]
        assert start["type"] == "session_started" and start["host"] == host.name
        assert start["account"] == user
        assert any(e["type"] == "observation" for e in events)
        sessions[(host.name, user)] = start["session_id"]
    ran_s = time.monotonic() - t0

    # The curious engineer: ana on eng-1.
    eng1 = site.hosts["eng-1"]
    peek = eng1.run(["cat", f"{PREFIX}/state/credential/host.pem"], user="ana")  # the host's
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    peek = eng1.run(["cat", "/home/bob/.abhed/state/events.db"], user="ana")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    # Straight to the front with no credential: the TLS handshake is refused (and recorded).
    bare = _curl(eng1, "ana", "-k", f"https://{model.address}:{PORT}/v1/chat/completions")
    assert bare.returncode != 0 and bare.stdout in ("000", ""), (bare.returncode, bare.stdout)
    # Through the relay as herself, outside the agent: answered, and recorded as hers.
    direct = _curl(eng1, "ana", "--unix-socket", "/run/abhed/model.sock",
                   "http://model-service/v1/chat/completions")
    assert direct.stdout == "200", (direct.stdout, direct.stderr)

    # The auditor collects the model host's record and each engineer's log.
    collected = tmp_path / "collected"
    for host, user in engineers:
        into = collected / "agents" / host.name / user
        into.mkdir(parents=True)
        state = host.path(f"/home/{user}/.abhed/state")
        for part in ("events.db", "events.db-wal", "segments"):
            if (state / part).is_dir():
                shutil.copytree(state / part, into / part)
            elif (state / part).exists():
                shutil.copy(state / part, into / part)
    # The live record is exported on the model host (a copy of a live SQLite file without
    # its -wal would miss what is not checkpointed yet); the export is re-verified here.
    abhed_env = {"ABHED_HOME": "/srv/auditor", "PYTHONPATH": str(ROOT)}
    exported = model.run([*abhed, "events", "export-requests", "--record",
                                   RECORD, "--out", "/srv/requests.jsonl"],
                                  env=abhed_env)
    assert exported.returncode == 0, exported.stderr
    record = collected / "model-1-requests.jsonl"
    shutil.copy(model.path("/srv/requests.jsonl"), record)
    stored = read_requests(record)
    gates = [s for s in stored if s.record.engineer == GATE_ENGINEER]
    # At least two turns per session (the forced call, then more), the refused and direct
    # calls, beside the install gates' own.
    assert len(stored) - len(gates) >= 2 * len(engineers) + 2
    join = subprocess.run([*abhed, "events", "join", "--requests", str(record), "--agent-logs",
                           str(collected / "agents"), "--json"], capture_output=True, text=True,
                          timeout=120, env={"ABHED_HOME": str(tmp_path / "auditor"),
                                            "PATH": "/usr/bin:/bin"})
    assert join.returncode == 1, join.stderr
    report = json.loads(join.stdout)
    # Each engineer's abhed lists the served models before its session starts.
    listings = [s for s in stored
                if s.record.endpoint == "/v1/models" and s.record.engineer != GATE_ENGINEER]
    assert len(listings) == len(engineers)
    # Each host's install gate asked through its release's relay, recorded as the gate.
    assert {s.record.host for s in gates} == set(ENGINEERS)
    assert {s.record.endpoint for s in gates} >= {"/v1/models", "/v1/chat/completions"}
    assert report["counts"] == {"matched": len(stored) - 2 - len(listings) - len(gates),
                                "ungoverned": 2, "listing": len(listings), "gate": len(gates)}
    flagged = [(r["host"], r["engineer"], r["outcome"]) for r in report["requests"]
               if r["verdict"] == "ungoverned"]
    assert sorted(flagged) == [(eng1.address, "_unknown", "refused"), ("eng-1", "ana", "ok")]
    matched = {(r["host"], r["engineer"], r["session_id"]) for r in report["requests"]
               if r["verdict"] == "matched"}
    assert matched == {(h, u, sid) for (h, u), sid in sessions.items()}
    text = subprocess.run([*abhed, "events", "join", "--requests", str(record), "--agent-logs",
                           str(collected / "agents")], capture_output=True, text=True,
                          timeout=120, env={"ABHED_HOME": str(tmp_path / "auditor"),
                                            "PATH": "/usr/bin:/bin"})
    print(text.stdout)  # docs/event-log.md shows this output
    ocsf = subprocess.run([*abhed, "events", "export-requests", "--record", str(record),
                           "--out", str(tmp_path / "r.ocsf"), "--format", "ocsf"],
                          capture_output=True, text=True, timeout=120,
                          env={"ABHED_HOME": str(tmp_path / "auditor"), "PATH": "/usr/bin:/bin"})
    assert ocsf.returncode == 0, ocsf.stderr
    for line in (tmp_path / "r.ocsf").read_text().splitlines():
        assert ocsf_problems(json.loads(line)) == []
    print(f"site: four sessions in {ran_s:.1f} s, whole test {time.monotonic() - t0:.1f} s")
    svc.outputs.append(f"$ abhed events join --requests model-1-requests.jsonl --agent-logs "
                       f"agents/\n{text.stdout}{text.stderr}")
    transcript = os.environ.get("ABHED_SITE_TRANSCRIPT")  # docs/operator-guide.md, section 12
    if transcript:
        Path(transcript).write_text("\n".join(svc.outputs))
    _bad_input(site, model, svc, tmp_path)


def _curl_body(host: SiteHost, user: str, sock: str) -> tuple[str, str]:
    """(status, body) of a chat request through the relay at ``sock``."""
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4})
    done = host.run(["curl", "-s", "-w", "\n%{http_code}", "--max-time", "120", "-H",
                     "content-type: application/json", "-d", body, "--unix-socket", sock,
                     "http://model-service/v1/chat/completions"], user=user)
    text, _, status = done.stdout.rpartition("\n")
    return status, text


def _bad_input(site: Site, model: SiteHost, svc: SiteService, tmp_path: Path) -> None:
    """What an operator gets wrong or an attacker tries: clear errors, nothing switched.
    (An expired credential is refused by ``credential install`` and by the TLS handshake:
    tests/installer/test_model_access.py and tests/models.)"""
    eng2 = site.hosts["eng-2"]
    held = eng2.path(f"{PREFIX}/state/credential/host.pem").read_bytes()
    # A credential from another site's CA: refused by name, the host's own one kept.
    other = tmp_path / "other-ca"
    assert svc.operator("ca", "init", str(other), "--site", "elsewhere").returncode == 0
    assert svc.operator("ca", "issue", str(other), "--host", "eng-2", "--role", "agent",
                        "--out", str(tmp_path / "foreign.pem")).returncode == 0
    eng2.path("/srv/foreign.pem").write_bytes((tmp_path / "foreign.pem").read_bytes())
    done = svc.on(eng2, "credential", "install", "/srv/foreign.pem", "--prefix", PREFIX)
    assert done.returncode != 0 and "from another CA" in done.stderr + done.stdout, done
    assert eng2.path(f"{PREFIX}/state/credential/host.pem").read_bytes() == held
    # A model host that answers as another: a front on model-1 holding model-9's
    # credential (its name and address are not model-1's); a relay asked to reach model-1
    # there refuses it by name.
    impostor = tmp_path / "model-9.pem"
    assert svc.operator("ca", "issue", str(svc.ca_dir), "--host", "model-9", "--role", "model",
                        "--dns", "model-9", "--ip", "10.213.0.250",
                        "--out", str(impostor)).returncode == 0
    model.path("/srv/model-9.pem").write_bytes(impostor.read_bytes())
    front = site.service(model, [*ABHED, "model-front", "--host", model.address, "--port", "8444",
                                 "--ca", f"{PREFIX}/state/credential/ca.pem",
                                 "--credential", "/srv/model-9.pem",
                                 "--crl", f"{PREFIX}/state/credential/crl.pem",
                                 "--upstream", f"http://127.0.0.1:{DEFAULT_PORT}",
                                 "--record", "/srv/impostor.sqlite"], env={"PYTHONPATH": str(ROOT)})
    relay = site.service(eng2, [RELEASE_ABHED, "model-relay", "--socket",
                                "/run/abhed/other.sock",
                                "--upstream", f"https://{model.address}:8444",
                                "--ca", f"{PREFIX}/state/credential/ca.pem",
                                "--credential", f"{PREFIX}/state/credential/host.pem",
                                "--engineers", f"{PREFIX}/state/engineers.json"])
    svc.procs.update({"impostor-front": front, "impostor-relay": relay})
    for proc in (front, relay):
        assert proc.stdout is not None and proc.stdout.readline().startswith("listening on")
    status, text = _curl_body(eng2, "cai", "/run/abhed/other.sock")
    assert status == "502" and "does not name the host asked for" in text, (status, text)
    # A revoked host: the operator revokes eng-2, the model host installs the new list; the
    # next request from eng-2 is refused by name, eng-1's still answered.
    assert svc.operator("ca", "revoke", str(svc.ca_dir), "--host", "eng-2").returncode == 0
    model.path("/srv/crl.pem").write_bytes((svc.ca_dir / "crl.pem").read_bytes())
    assert svc.on(model, "credential", "crl", "/srv/crl.pem", "--prefix", PREFIX).returncode == 0
    status, text = _curl_body(eng2, "cai", RELAY_SOCKET)
    assert status == "403" and "revoked" in text, (status, text)
    status, text = _curl_body(site.hosts["eng-1"], "bob", RELAY_SOCKET)
    assert status == "200", (status, text)
