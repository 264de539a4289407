"""The auditor's join: model-side records against engineers' event logs, both verified first.

A real agent (built by the real composition) talks to a scripted server that
records the ids it was sent; the model-side records are made from what the
server saw, as the front makes them.  The simulated site (tests/site/) runs
the same join over real hosts, users and vLLM.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.events import (
    EventStore,
    Forwarder,
    ForwardSettings,
    request_record,
)
from appliance.events.requests import collect_agent_logs, export_requests, join_logs
from models import RequestLog, RequestRecord, StoredRequest
from tests.appliance.events.ocsf_schema import ocsf_problems
from tests.appliance.helpers import scripted_agent

HOST = socket.gethostname()
ME = pwd.getpwuid(os.getuid()).pw_name
T0, T1 = "2026-12-04T10:00:00+00:00", "2026-12-04T10:00:01+00:00"


def _rec(session: str | None, request: str | None, *, host: str = HOST, engineer: str = ME,
         outcome: str = "ok", status: int = 200,
         endpoint: str = "/v1/chat/completions") -> RequestRecord:
    return RequestRecord(host=host, engineer=engineer, session_id=session, request_id=request,
                         endpoint=endpoint, model="scripted", started_at=T0, ended_at=T1, tokens_in=5,
                         tokens_out=2, outcome=outcome, status=status)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """(agent logs folder, request record, session id): one governed run with a retried turn."""
    root = tmp_path_factory.mktemp("join")
    ws = root / "ws"
    ws.mkdir()
    store = EventStore(root / "events.db")
    steps = [{"status": 503, "error": "busy"},
             {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}, {"text": "done"}]
    with scripted_agent(ws, steps, store=store, provider={"max_retries": 1}) as (agent, server, _):
        agent.run("look")
        sid = agent.session.id
        ids = list(server.ids)
    store.close()
    logs = root / "agents" / HOST / ME
    logs.mkdir(parents=True)
    shutil.copy(root / "events.db", logs / "events.db")
    with RequestLog(root / "requests.db") as log:
        for i, (s, r) in enumerate(ids):
            log.append(_rec(s, r, outcome="error" if i == 0 else "ok",
                            status=503 if i == 0 else 200))
    yield root / "agents", root / "requests.db", sid


def _with(tmp_path: Path, base: Path, *extra: RequestRecord) -> Path:
    path = tmp_path / "requests.db"
    shutil.copy(base, path)
    with RequestLog(path) as log:
        for r in extra:
            log.append(r)
    return path


def test_a_governed_run_is_all_matched_retries_included(site: tuple[Path, Path, str]) -> None:
    agents, record, sid = site
    report = join_logs([record], collect_agent_logs(agents))
    assert report.problems == [] and report.exit_code == 0
    assert [j.verdict for j in report.requests] == ["matched"] * 3
    # The 503 and its retry are two records of one turn.
    assert report.requests[0].stored.record.request_id == report.requests[1].stored.record.request_id


def test_direct_calls_are_listed_by_engineer_and_host(tmp_path: Path,
                                                      site: tuple[Path, Path, str]) -> None:
    agents, base, sid = site
    record = _with(tmp_path, base, _rec(None, None), _rec("s-made-up", "r-1"),
                   _rec(sid, "r-not-a-turn"), _rec(sid, "x", engineer="bob"),
                   _rec(sid, "y", host="elsewhere"), _rec(None, None, endpoint="/v1/models"))
    report = join_logs([record], collect_agent_logs(agents))
    assert report.exit_code == 1
    verdicts = [j.verdict for j in report.requests[3:]]
    # bob's and elsewhere's logs were not collected: a session id is only good for its owner.
    # A listing of the served models asks nothing of the model: counted, not flagged.
    assert verdicts == ["ungoverned", "ungoverned", "in_session", "ungoverned", "ungoverned",
                        "listing"]
    text = "\n".join(report.lines())
    assert f"{ME} on {HOST}:" in text and f"bob on {HOST}:" in text
    assert "NO GOVERNED SESSION" in text and "in session, no recorded turn" in text


def test_the_installer_gates_requests_are_counted_apart_not_flagged(
        tmp_path: Path, site: tuple[Path, Path, str]) -> None:
    """An agent host's health gate asks through a relay that names it GATE_ENGINEER
    (installer._gate_relay): its session is in no engineer's log, and it is no engineer."""
    from models import GATE_ENGINEER

    agents, base, _ = site
    record = _with(tmp_path, base, _rec("gate-session", "r-1", engineer=GATE_ENGINEER),
                   _rec(None, None, engineer=GATE_ENGINEER, endpoint="/v1/models"))
    report = join_logs([record], collect_agent_logs(agents))
    assert report.exit_code == 0
    assert [j.verdict for j in report.requests[3:]] == ["gate", "gate"]
    assert report.as_json()["counts"] == {"matched": 3, "gate": 2}
    assert "2 from the installer's health gate" in report.lines()[0]


def _tamper(db: Path, table: str, update: str) -> None:
    """Change a row as someone with the file could: the append-only trigger dropped first."""
    conn = sqlite3.connect(db)
    conn.execute(f"DROP TRIGGER {table}_no_update")
    conn.execute(update)
    conn.commit()
    conn.close()


def test_a_tampered_record_or_log_cannot_be_checked(tmp_path: Path,
                                                    site: tuple[Path, Path, str]) -> None:
    agents, base, _ = site
    record = _with(tmp_path, base)
    _tamper(record, "requests",
            "UPDATE requests SET body = replace(body, '\"ok\"', '\"refused\"') WHERE seq = 2")
    report = join_logs([record], collect_agent_logs(agents))
    assert report.exit_code == 2 and "broken at record 2" in report.problems[0]
    bad_agents = tmp_path / "agents"
    shutil.copytree(agents, bad_agents)
    db = bad_agents / HOST / ME / "events.db"
    _tamper(db, "events",
            "UPDATE events SET body = replace(body, 'look', 'LOOK') WHERE type = 'user_message'")
    report = join_logs([base], collect_agent_logs(bad_agents))
    assert report.exit_code == 2 and "does not verify" in report.problems[0]


def test_a_log_collected_under_another_host_or_engineer_is_refused(
        tmp_path: Path, site: tuple[Path, Path, str]) -> None:
    agents, base, _ = site
    for where, words in (("other-host/" + ME, "ran on"), (f"{HOST}/bob", "ran as")):
        moved = tmp_path / where.replace("/", "_") / where
        moved.mkdir(parents=True)
        shutil.copy(agents / HOST / ME / "events.db", moved / "events.db")
        report = join_logs([base], collect_agent_logs(moved.parent.parent))
        assert report.exit_code == 2 and words in report.problems[0], report.problems


def test_bad_inputs_name_what_is_wrong(tmp_path: Path, site: tuple[Path, Path, str]) -> None:
    agents, base, _ = site
    assert join_logs([], collect_agent_logs(agents)).exit_code == 2
    (tmp_path / "h" / "e").mkdir(parents=True)
    with pytest.raises(ValueError, match="no events.db"):
        collect_agent_logs(tmp_path)
    with pytest.raises(ValueError, match="not a folder"):
        collect_agent_logs(tmp_path / "absent")
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n")
    assert "not a request record export line" in join_logs(
        [junk], collect_agent_logs(agents)).problems[0]


def test_exports_join_like_the_files_and_ocsf_validates(tmp_path: Path,
                                                        site: tuple[Path, Path, str]) -> None:
    agents, base, _ = site
    record = _with(tmp_path, base, _rec(None, None, outcome="refused", status=401))
    assert export_requests(record, tmp_path / "r.jsonl") == 4
    assert export_requests(record, tmp_path / "r.ocsf.jsonl", fmt="ocsf") == 4
    exported = tmp_path / "agents" / HOST / ME
    exported.mkdir(parents=True)
    store = EventStore(agents / HOST / ME / "events.db")
    from appliance.events.maintenance import export_log
    export_log(store, exported / "export.jsonl")
    store.close()
    report = join_logs([tmp_path / "r.jsonl"], collect_agent_logs(tmp_path / "agents"))
    assert [j.verdict for j in report.requests] == ["matched"] * 3 + ["ungoverned"]
    for line in (tmp_path / "r.ocsf.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert ocsf_problems(rec) == [], ocsf_problems(rec)
    assert json.loads(line)["actor"]["user"]["name"] == ME


def test_the_cli_exits_0_1_2(tmp_path: Path, site: tuple[Path, Path, str]) -> None:
    agents, base, _ = site
    abhed = [sys.executable, "-m", "cli"]
    env = {**os.environ, "ABHED_HOME": str(tmp_path / "home")}
    ok = subprocess.run([*abhed, "events", "join", "--requests", str(base), "--agent-logs",
                         str(agents)], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "3 matched to a recorded turn" in ok.stdout
    flagged = _with(tmp_path, base, _rec(None, None))
    one = subprocess.run([*abhed, "events", "join", "--requests", str(flagged), "--agent-logs",
                          str(agents), "--json"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert one.returncode == 1 and json.loads(one.stdout)["counts"]["ungoverned"] == 1
    two = subprocess.run([*abhed, "events", "join", "--requests", str(tmp_path / "absent"),
                          "--agent-logs", str(agents)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert two.returncode == 2 and "cannot read" in two.stderr


def test_request_records_are_forwarded_as_ocsf_syslog(tmp_path: Path) -> None:
    sock_path = tmp_path / "log.sock"
    collector = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    collector.bind(str(sock_path))
    collector.settimeout(10)
    forwarder = Forwarder(ForwardSettings(to="syslog", socket=str(sock_path)), "requests.db")
    seen: list[StoredRequest] = []
    with RequestLog(tmp_path / "requests.db", on_append=seen.append) as log:
        stored = log.append(_rec("s-1", "r-1"))
    assert forwarder.forward_request(seen[0]) == []
    message = collector.recv(65536).decode()
    assert f'seq="1" hash="{stored.hash}"' in message and 'request="r-1"' in message
    record = json.loads(message[message.index("{"):])
    assert ocsf_problems(record) == [] and record["metadata"]["uid"] == stored.hash
    assert request_record(stored, log_name="x", product={"name": "Abhed"})["api"]["request"][
        "uid"] == "r-1"
    forwarder.close()
    collector.close()
