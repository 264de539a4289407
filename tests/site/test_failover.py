"""Two model hosts behind one endpoint, one restarted while engineers work.

The site: ``model-1`` and ``model-2`` (each its own network namespace, real vLLM CPU
build with the test model, each pinned to its own core), the vLLM project's router on
``model-1`` over both, the model-service front before it (the installer's units:
``installer._services.role_units`` with the replicas), and ``eng-1`` whose engineers
work through their host's relay.  A front told to expect another ``max_model_len`` than
the hosts serve is refused before it binds its port.  Then ana and bob work while
``model-2`` is stopped, and again while it is started anew: every session ends as it
should, every request the front saw fail belongs to a turn whose retries the event log
names (or to a turn ended ``model_stream_lost``), and ``model-2`` answers again once back.

One test: the vLLM starts (minutes on a CPU) are shared by its assertions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from models import read_requests
from tests.helpers import ROOT, router_python, wait_for
from tests.site.harness import Site, SiteHost, SiteVllm, build_site, start_vllm
from tests.site.model_service import (
    PREFIX,
    RECORD,
    engineer_config,
    site_layer,
    start_model_service,
)

pytestmark = pytest.mark.slow

USERS = ("ana", "bob")


def _both(site: Site) -> tuple[SiteVllm, SiteVllm]:
    """vLLM on both model hosts at once, each on its own core; model-2's on its site address
    (the router on model-1 reaches it over the site network)."""
    got: dict[str, SiteVllm] = {}
    errors: list[BaseException] = []
    m1, m2 = site.hosts["model-1"], site.hosts["model-2"]

    def start(host: SiteHost, **kw: Any) -> None:
        try:
            got[host.name] = start_vllm(site, host, **kw)
        except BaseException as exc:  # re-raised below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(m1,), kwargs={"cpus": "0"}),
               threading.Thread(target=start, args=(m2,),
                                kwargs={"cpus": "1", "listen": m2.address})]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return got["model-1"], got["model-2"]


def _root(v: SiteVllm) -> str:
    return v.base_url.removesuffix("/v1")


def _sessions(site: Site, tag: str) -> list[tuple[str, subprocess.Popen[str]]]:
    """One session per engineer on eng-1, started as the site's services: a failed
    assertion leaves none running (Site.close stops them and closes their pipes)."""
    eng = site.hosts["eng-1"]
    return [(user, site.service(
        eng, [sys.executable, "-m", "cli", "run", f"list the files in /home/{user}/ws ({tag})",
              "--workspace", f"/home/{user}/ws", "--force-tool", "glob", "--json"], user=user,
        env={"ABHED_HOME": f"/home/{user}/.abhed", "PYTHONPATH": str(ROOT)}))
        for user in USERS]


def _ended(runs: list[tuple[str, subprocess.Popen[str]]]) -> list[list[dict[str, Any]]]:
    """Each session's events; it ended done, or with the named model_stream_lost (exit 4)."""
    logs = []
    for user, proc in runs:
        out, err = proc.communicate(timeout=600)
        events = [json.loads(line)["event"] for line in out.splitlines()
                  if line.startswith('{"type": "event"')]
        ended = [e for e in events if e["type"] == "run_ended"]
        assert ended, f"{user}: no run_ended (exit {proc.returncode}): {err[-3000:]}"
        reason = ended[-1]["reason"]
        assert (proc.returncode, reason) in ((0, "done"), (0, "max_turns"),
                                             (4, "model_stream_lost")), \
            f"{user}: exit {proc.returncode}, {reason}: {ended[-1]['message']} {err[-2000:]}"
        logs.append(events)
    return logs


def _chat_posts(v: SiteVllm, since: int) -> int:
    log = v.host.path("/srv/vllm/logs/vllm-tiny.log").read_bytes()[since:]
    return log.count(b"POST /v1/chat/completions")


def test_a_model_host_stopped_and_restarted_mid_session_loses_nothing_silently(
        tmp_path: Path) -> None:
    t0 = time.monotonic()
    site = build_site({"eng-1": USERS}, model_hosts=("model-1", "model-2"))
    try:
        _failover(site, tmp_path, t0)
    finally:
        site.close()


def _failover(site: Site, tmp_path: Path, t0: float) -> None:
    router_py = router_python()
    v1, v2 = _both(site)
    started_s = time.monotonic() - t0
    m1, eng = site.hosts["model-1"], site.hosts["eng-1"]
    svc = start_model_service(site, v1, tmp_path / "ca", replicas=(_root(v1), _root(v2)),
                              router_python=router_py)
    _refused_before_traffic(m1, v2)
    wait_for(lambda: m1.run([sys.executable, "-c", "import socket; socket.create_connection("
                             "('127.0.0.1', 8100), 1)"]).returncode == 0, 120,
             poll_s=0.5, what="the router listening on model-1")
    # About 15 s of retries (0.2 s doubling, 5 s at most): longer than the router takes to
    # notice a stopped host (its health check every 5 s), as a site behind it must set.
    site_layer(eng, v1.served, max_retries=8)
    for user in USERS:
        engineer_config(eng, user)

    # Both hosts up: the router spreads the sessions over them.
    logs = _ended(_sessions(site, "both up"))
    assert _chat_posts(v2, 0) > 0 and _chat_posts(v1, 0) > 0
    # model-2 stopped once the front has seen this round's first request.
    before = len(read_requests(m1.path(RECORD)))
    runs = _sessions(site, "model-2 stops")
    wait_for(lambda: len(read_requests(m1.path(RECORD))) > before, 300, poll_s=0.2,
             what="the round's first request at the front")
    site.stop(v2.proc)
    logs += _ended(runs)
    # model-2 started anew (same port: the router knows it by its URL) while they work.
    offset = v2.host.path("/srv/vllm/logs/vllm-tiny.log").stat().st_size
    back: list[SiteVllm] = []
    failed: list[BaseException] = []

    def again() -> None:
        try:
            back.append(start_vllm(site, v2.host, cpus="1", listen=v2.host.address,
                                   port=int(_root(v2).rsplit(":", 1)[1])))
        except BaseException as exc:  # re-raised below, on the test's thread
            failed.append(exc)

    restart = threading.Thread(target=again)
    restart.start()
    logs += _ended(_sessions(site, "model-2 restarts"))
    restart.join()
    if failed:
        raise failed[0]
    # Once the router's health check sees it, model-2 takes its share again.
    deadline = time.monotonic() + 120
    while _chat_posts(back[0], offset) == 0:
        assert time.monotonic() < deadline, "model-2 took no request after its restart"
        logs += _ended(_sessions(site, "model-2 back"))
    _nothing_lost_silently(m1, logs)
    for proc in svc.procs.values():
        site.stop(proc)
    print(f"\nfailover: {len(logs)} sessions, front records "
          f"{[r.record.outcome for r in read_requests(m1.path(RECORD))]}")
    print(f"\nfailover: vLLM x2 up in {started_s:.0f} s, whole test {time.monotonic() - t0:.0f} s")


def _refused_before_traffic(m1: SiteHost, v2: SiteVllm) -> None:
    """A front declared for another max_model_len than the hosts serve does not start."""
    catalog = json.loads(m1.path("/srv/vllm/catalog.json").read_text())
    catalog["models"][0]["max_model_len"] = 4096
    m1.path("/srv/other-catalog.json").write_text(json.dumps(catalog))
    cred = f"{PREFIX}/state/credential"
    done = m1.run([sys.executable, "-m", "cli", "model-front", "--host", "127.0.0.1", "--port",
                   "0", "--ca", f"{cred}/ca.pem", "--credential", f"{cred}/host.pem", "--crl",
                   f"{cred}/crl.pem", "--upstream", "http://127.0.0.1:8100", "--record",
                   "/srv/other.sqlite", "--catalog", "/srv/other-catalog.json",
                   "--replica", _root(v2)], env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"model host {_root(v2)} refused: max_model_len is 8192, the site declared 4096" \
        in done.stderr, done.stderr
    assert "listening" not in done.stdout


def _nothing_lost_silently(m1: SiteHost, logs: list[list[dict[str, Any]]]) -> None:
    """Every request the front saw fail is a retried attempt the event log names, or the
    turn that ended model_stream_lost."""
    retried = {e["request_id"] for events in logs for e in events
               if e["type"] == "model_turn" and e.get("retries")}
    lost = {events[0]["session_id"] for events in logs
            if any(e["type"] == "run_ended" and e["reason"] in ("model_stream_lost",
                                                                "provider_error")
                   for e in events)}
    failed = [r.record for r in read_requests(m1.path(RECORD))
              if r.record.outcome != "ok" and r.record.endpoint == "/v1/chat/completions"]
    unnamed = [f for f in failed if f.request_id not in retried and f.session_id not in lost]
    assert not unnamed, [(f.request_id, f.status, f.detail) for f in unnamed]
    sessions = {events[0]["session_id"] for events in logs}
    assert len(sessions) == len(logs) >= 6
