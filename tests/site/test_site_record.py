"""A site at work, then its audit: four engineers on two hosts, one model host, one join.

The engineers' ``abhed run`` sessions go, all at once, from their own hosts
to the model host's front, which attributes each request, records it
(``models.RequestLog``) and passes it to real vLLM.  One engineer then tries
what a curious one would: another engineer's credential (unreadable), a call
with none (refused, and recorded), a direct call with their own (answered,
recorded).  The auditor collects the record and the four event logs and
runs ``abhed events join``: every agent request is matched to its turn, the
direct one and the refused one are listed, exit 1.

The front here is tests/site/front_stub.py, a stand-in for the real front
(mutual TLS, the engineer host's relay) until it lands; it records through
the same API the real one uses.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from models import read_requests
from tests.appliance.events.ocsf_schema import ocsf_problems
from tests.site.harness import ENGINEERS, Site, SiteHost, SiteVllm

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PORT = 8443


def _start_front(site: Site, vllm: SiteVllm) -> str:
    """The stub front on the model host; its URL as the engineers' hosts see it."""
    model = vllm.host
    keys: dict[str, list[str]] = {}
    for name, users in ENGINEERS.items():
        host = site.hosts[name]
        for user in users:
            key = secrets.token_hex(16)
            keys[key] = [name, user, host.address]
            home = host.path(f"/home/{user}")
            own = home / ".abhed"
            own.mkdir(mode=0o700)
            (own / "model.key").write_text(key + "\n")
            (own / "model.key").chmod(0o600)
            uid = host.users[user]
            for p in (own, own / "model.key"):
                shutil.chown(p, uid, uid)
    front = model.path("/srv/front")
    front.mkdir(mode=0o700)
    (front / "keys.json").write_text(json.dumps(keys))
    upstream = vllm.base_url.removesuffix("/v1")
    proc = site.service(model, [sys.executable, str(ROOT / "tests/site/front_stub.py"),
                                "/srv/front/keys.json", "/srv/front/requests.db",
                                f"{model.address}:{PORT}", upstream],
                        env={"PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening"), proc.stderr.read() if proc.stderr else line
    return f"http://{model.address}:{PORT}/v1"


def _engineer_config(host: SiteHost, user: str, url: str, served: str) -> None:
    provider = {"name": "site", "api": "openai", "base_url": url, "model": served,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 64},
                "api_key_file": f"/home/{user}/.abhed/model.key", "max_retries": 1}
    home = host.path(f"/home/{user}")
    (home / ".abhed" / "config.json").write_text(json.dumps(
        {"custom_providers": [provider], "loop": {"max_turns": 4}}))
    (home / "ws").mkdir()
    (home / "ws" / "notes.txt").write_text(f"{user}'s notes\n")
    for p in (home / ".abhed" / "config.json", home / "ws", home / "ws" / "notes.txt"):
        shutil.chown(p, host.users[user], host.users[user])


def _curl(host: SiteHost, user: str, url: str, *headers: str) -> subprocess.CompletedProcess[str]:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4})
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "120",
            "-H", "content-type: application/json", "-d", body]
    for h in headers:
        argv += ["-H", h]
    return host.run([*argv, f"{url}/chat/completions"], user=user)


def test_a_site_at_work_is_accounted_for_and_the_direct_call_flagged(
        site: Site, site_vllm: SiteVllm, tmp_path: Path) -> None:
    t0 = time.monotonic()
    url = _start_front(site, site_vllm)
    engineers = [(site.hosts[h], u) for h, users in ENGINEERS.items() for u in users]
    for host, user in engineers:
        _engineer_config(host, user, url, site_vllm.served)
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
    peek = eng1.run(["cat", "/home/bob/.abhed/model.key"], user="ana")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    assert eng1.run(["cat", "/home/cai/.abhed/model.key"], user="ana").returncode != 0  # not here
    assert _curl(eng1, "ana", url).stdout == "401"  # no credential: refused (and recorded)
    key = eng1.path("/home/ana/.abhed/model.key").read_text().strip()
    direct = _curl(eng1, "ana", url, f"authorization: Bearer {key}")
    assert direct.stdout == "200", direct.stderr  # their own credential, outside the agent

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
    assert sorted(flagged) == [("eng-1", "ana", "ok"), ("eng-1", "unknown", "refused")]
    matched = {(r["host"], r["engineer"], r["session_id"]) for r in report["requests"]
               if r["verdict"] == "matched"}
    assert matched == {(h, u, sid) for (h, u), sid in sessions.items()}
    ocsf = subprocess.run([*abhed, "events", "export-requests", "--record", str(record),
                           "--out", str(tmp_path / "r.ocsf"), "--format", "ocsf"],
                          capture_output=True, text=True, timeout=120,
                          env={"ABHED_HOME": str(tmp_path / "auditor"), "PATH": "/usr/bin:/bin"})
    assert ocsf.returncode == 0, ocsf.stderr
    for line in (tmp_path / "r.ocsf").read_text().splitlines():
        assert ocsf_problems(json.loads(line)) == []
    print(f"site: four sessions in {ran_s:.1f} s, whole test {time.monotonic() - t0:.1f} s")
