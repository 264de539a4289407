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
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from installer._services import RELAY_SOCKET
from models import read_requests
from tests.appliance.events.ocsf_schema import ocsf_problems
from tests.site.harness import ENGINEERS, Site, SiteHost, SiteVllm
from tests.site.model_service import (
    ABHED,
    PREFIX,
    SiteService,
    engineer_config,
    site_layer,
    start_model_service,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PORT = 8443
RECORD = f"{PREFIX}/data/model-requests.sqlite"  # the front unit's --record


def _curl(host: SiteHost, user: str, *how: str) -> subprocess.CompletedProcess[str]:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4})
    return host.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "120",
                     "-H", "content-type: application/json", "-d", body, *how], user=user)


def test_a_site_at_work_is_accounted_for_and_the_direct_call_flagged(
        site: Site, site_vllm: SiteVllm, tmp_path: Path) -> None:
    t0 = time.monotonic()
    svc = start_model_service(site, site_vllm, tmp_path / "ca")
    try:
        _work_then_audit(site, site_vllm, svc, tmp_path, t0)
    finally:  # the site outlives this test (one per run): leave it as it was found
        for proc in svc.procs.values():
            site.stop(proc)
        for name in ENGINEERS:
            shutil.rmtree(site.hosts[name].path("/etc/abhed/site"), ignore_errors=True)


def _work_then_audit(site: Site, site_vllm: SiteVllm, svc: SiteService, tmp_path: Path,
                     t0: float) -> None:
    engineers = [(site.hosts[h], u) for h, users in ENGINEERS.items() for u in users]
    for name in ENGINEERS:
        site_layer(site.hosts[name], site_vllm.served)
    for host, user in engineers:
        engineer_config(host, user)
    abhed = [sys.executable, "-m", "cli"]
    # All four at once, each on their own host as themselves.
    runs = [(host, user, host.popen(
        [*abhed, "run", f"list the files in /home/{user}/ws", "--workspace", f"/home/{user}/ws",
         "--force-tool", "glob", "--json"], user=user,
        env={"ABHED_HOME": f"/home/{user}/.abhed", "PYTHONPATH": str(ROOT)}))
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
    bare = _curl(eng1, "ana", "-k", f"https://{site_vllm.host.address}:{PORT}/v1/chat/completions")
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
    exported = site_vllm.host.run([*abhed, "events", "export-requests", "--record",
                                   RECORD, "--out", "/srv/requests.jsonl"],
                                  env=abhed_env)
    assert exported.returncode == 0, exported.stderr
    record = collected / "model-1-requests.jsonl"
    shutil.copy(site_vllm.host.path("/srv/requests.jsonl"), record)
    stored = read_requests(record)
    # At least two turns per session (the forced call, then more), the refused and direct calls.
    assert len(stored) >= 2 * len(engineers) + 2
    join = subprocess.run([*abhed, "events", "join", "--requests", str(record), "--agent-logs",
                           str(collected / "agents"), "--json"], capture_output=True, text=True,
                          timeout=120, env={"ABHED_HOME": str(tmp_path / "auditor"),
                                            "PATH": "/usr/bin:/bin"})
    assert join.returncode == 1, join.stderr
    report = json.loads(join.stdout)
    # Each engineer's abhed lists the served models before its session starts.
    listings = [s for s in stored if s.record.endpoint == "/v1/models"]
    assert len(listings) == len(engineers)
    assert report["counts"] == {"matched": len(stored) - 2 - len(listings), "ungoverned": 2,
                                "listing": len(listings)}
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
    _bad_input(site, site_vllm, svc, tmp_path)


def _curl_body(host: SiteHost, user: str, sock: str) -> tuple[str, str]:
    """(status, body) of a chat request through the relay at ``sock``."""
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4})
    done = host.run(["curl", "-s", "-w", "\n%{http_code}", "--max-time", "120", "-H",
                     "content-type: application/json", "-d", body, "--unix-socket", sock,
                     "http://model-service/v1/chat/completions"], user=user)
    text, _, status = done.stdout.rpartition("\n")
    return status, text


def _bad_input(site: Site, vllm: SiteVllm, svc: SiteService, tmp_path: Path) -> None:
    """What an operator gets wrong or an attacker tries: clear errors, nothing switched.
    (An expired credential is refused by ``credential install`` and by the TLS handshake:
    tests/installer/test_model_access.py and tests/models.)"""
    eng2, model = site.hosts["eng-2"], vllm.host
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
                                 "--upstream", vllm.base_url.removesuffix("/v1"),
                                 "--record", "/srv/impostor.sqlite"], env={"PYTHONPATH": str(ROOT)})
    relay = site.service(eng2, [*ABHED, "model-relay", "--socket", "/run/abhed/other.sock",
                                "--upstream", f"https://{model.address}:8444",
                                "--ca", f"{PREFIX}/state/credential/ca.pem",
                                "--credential", f"{PREFIX}/state/credential/host.pem",
                                "--engineers", f"{PREFIX}/state/engineers.json"],
                         env={"PYTHONPATH": str(ROOT)})
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
