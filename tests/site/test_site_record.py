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
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from installer._site_ca import SiteCA
from models import read_requests
from tests.appliance.events.ocsf_schema import ocsf_problems
from tests.site.harness import ENGINEERS, Site, SiteHost, SiteVllm

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PORT = 8443


def _start_model_service(site: Site, vllm: SiteVllm,
                         ca_dir: Path) -> list[subprocess.Popen[str]]:
    """The site CA's credentials on every host, the front on the model host, a relay on
    each engineer's host, as the installer's units run them (root, /etc/abhed)."""
    ca = SiteCA(ca_dir)
    ca.init("site-test", days=30)
    for host in site.hosts.values():
        issued = ca.issue(host.name, host.role, dns=[host.name], ips=[host.address], days=30)
        assert issued.pem is not None
        etc = host.path("/etc/abhed")
        shutil.copy(ca.cert_path, etc / "ca.pem")
        (etc / "credential.pem").write_bytes(issued.pem)
        (etc / "credential.pem").chmod(0o600)
        if host.role == "agent":
            (etc / "engineers.json").write_text(json.dumps(
                {"format": "abhed-engineers/1",
                 "engineers": {u: {"uid": uid} for u, uid in host.users.items()}}))
    model = vllm.host
    shutil.copy(ca.crl_path, model.path("/etc/abhed/crl.pem"))
    model.path("/srv/front").mkdir(mode=0o700)
    abhed = [sys.executable, "-m", "cli"]
    env = {"PYTHONPATH": str(ROOT)}
    services = [site.service(model, [
        *abhed, "model-front", "--host", model.address, "--port", str(PORT),
        "--ca", "/etc/abhed/ca.pem", "--credential", "/etc/abhed/credential.pem",
        "--crl", "/etc/abhed/crl.pem", "--upstream", vllm.base_url.removesuffix("/v1"),
        "--record", "/srv/front/requests.db"], env=env)]
    services += [site.service(host, [
        *abhed, "model-relay", "--socket", "/run/abhed/model.sock",
        "--upstream", f"https://{model.address}:{PORT}", "--ca", "/etc/abhed/ca.pem",
        "--credential", "/etc/abhed/credential.pem", "--engineers", "/etc/abhed/engineers.json"],
        env=env) for host in site.hosts.values() if host.role == "agent"]
    for proc in services:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on"), proc.stderr.read() if proc.stderr else line
    return services


def _engineer_config(host: SiteHost, user: str, served: str) -> None:
    provider = {"name": "site", "api": "openai", "base_url": "http://model-service/v1",
                "unix_socket": "/run/abhed/model.sock", "model": served,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 64}, "max_retries": 1}
    home = host.path(f"/home/{user}")
    (home / ".abhed").mkdir(mode=0o700)
    (home / ".abhed" / "config.json").write_text(json.dumps(
        {"custom_providers": [provider], "loop": {"max_turns": 4}}))
    (home / "ws").mkdir()
    (home / "ws" / "notes.txt").write_text(f"{user}'s notes\n")
    for p in (home / ".abhed", home / ".abhed" / "config.json", home / "ws",
              home / "ws" / "notes.txt"):
        shutil.chown(p, host.users[user], host.users[user])


def _curl(host: SiteHost, user: str, *how: str) -> subprocess.CompletedProcess[str]:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4})
    return host.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "120",
                     "-H", "content-type: application/json", "-d", body, *how], user=user)


def test_a_site_at_work_is_accounted_for_and_the_direct_call_flagged(
        site: Site, site_vllm: SiteVllm, tmp_path: Path) -> None:
    t0 = time.monotonic()
    services = _start_model_service(site, site_vllm, tmp_path / "ca")
    try:
        _work_then_audit(site, site_vllm, tmp_path, t0)
    finally:
        for proc in services:  # the site outlives this test: leave it as it was found
            site.stop(proc)


def _work_then_audit(site: Site, site_vllm: SiteVllm, tmp_path: Path, t0: float) -> None:
    engineers = [(site.hosts[h], u) for h, users in ENGINEERS.items() for u in users]
    for host, user in engineers:
        _engineer_config(host, user, site_vllm.served)
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
    peek = eng1.run(["cat", "/etc/abhed/credential.pem"], user="ana")  # the host's credential
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
                                   "/srv/front/requests.db", "--out", "/srv/requests.jsonl"],
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
