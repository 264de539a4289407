"""The auditor's join: every model request matched to a governed session, or listed.

Input, as an auditor collects it (docs/event-log.md, "The auditor's join"):

* the model service's request records (``models.RequestLog`` files or their
  JSONL exports), one or more model hosts;
* the engineers' event logs, one folder per host and engineer:
  ``DIR/<host>/<engineer>/`` holding that engineer's ``events.db`` (with its
  ``segments/``) or one or more JSONL exports of it.

Both sides are verified first (every chain whole, every export's manifest);
then each request record is joined on (host, engineer, session, request id):

* ``matched``: its session is in that engineer's log on that host and its
  request id is one of that session's model turns (a retried turn: several
  records, one turn);
* ``in session``: its session is there but no turn of it names the request
  (a turn that failed before a reply was recorded, a compaction summary, or
  a caller that reused a session id);
* ``ungoverned``: no session id, or one that engineer's log on that host
  does not hold: a call from outside the agent;
* ``listing``: a request for a path that only describes the service
  (``models.LISTING_ENDPOINTS``: the model list the agent asks for before
  its session exists); counted, not flagged.
* ``gate``: a request of the installer's health gate on that host
  (engineer ``models.GATE_ENGINEER``, a name no engineer can have: only a
  relay the installer starts for its gate sends it); counted, not flagged.

Exit codes (:attr:`JoinReport.exit_code`): 0 every request in a governed
session, 1 ungoverned requests found (listed), 2 could not check.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from appliance.events._schema import ROW_COLUMNS
from appliance.events._segment_files import open_ro, sealed_segments
from appliance.events.maintenance import verify_export, verify_log
from models import GATE_ENGINEER, LISTING_ENDPOINTS, RequestLogError, StoredRequest, read_requests

__all__ = ["AgentLog", "JoinReport", "JoinedRequest", "collect_agent_logs", "join_logs"]

Verdict = Literal["matched", "in_session", "ungoverned", "listing", "gate"]


@dataclass(frozen=True)
class AgentLog:
    """One engineer's event log on one host: an ``events.db`` or a JSONL export."""

    host: str
    engineer: str
    path: Path


@dataclass(frozen=True)
class JoinedRequest:
    stored: StoredRequest
    source: str
    verdict: Verdict

    def as_json(self) -> dict[str, Any]:
        r = self.stored.record
        return {"verdict": self.verdict, "source": self.source, "seq": self.stored.seq,
                **r.model_dump(mode="json", exclude={"schema_version"})}


@dataclass
class JoinReport:
    requests: list[JoinedRequest] = field(default_factory=list)
    agent_logs: int = 0
    sessions: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.problems:
            return 2
        return 1 if any(j.verdict == "ungoverned" for j in self.requests) else 0

    def counts(self) -> Counter[str]:
        return Counter(j.verdict for j in self.requests)

    def as_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "problems": self.problems,
                "agent_logs": self.agent_logs, "sessions": self.sessions,
                "counts": dict(self.counts()),
                "requests": [j.as_json() for j in self.requests]}

    def lines(self) -> list[str]:
        """What the command prints: the verdict, then the ungoverned requests by engineer."""
        if self.problems:
            return ["could not check: " + p for p in self.problems]
        c = self.counts()
        out = [f"{len(self.requests)} model request(s) from {self.agent_logs} agent log(s) "
               f"({self.sessions} session(s)): {c['matched']} matched to a recorded turn, "
               f"{c['in_session']} in a governed session without a recorded turn, "
               f"{c['ungoverned']} with no governed session"
               + (f"; {c['listing']} listing(s) of the service ({', '.join(sorted(LISTING_ENDPOINTS))})"
                  if c["listing"] else "")
               + (f"; {c['gate']} from the installer's health gate" if c["gate"] else "")]
        by_who: dict[tuple[str, str], list[JoinedRequest]] = {}
        for j in self.requests:
            if j.verdict in ("in_session", "ungoverned"):
                by_who.setdefault((j.stored.record.host, j.stored.record.engineer), []).append(j)
        for (host, engineer), items in sorted(by_who.items()):
            out.append(f"{engineer} on {host}:")
            for j in items:
                r = j.stored.record
                label = ("NO GOVERNED SESSION" if j.verdict == "ungoverned"
                         else "in session, no recorded turn")
                out.append(f"  {label}: {j.source} #{j.stored.seq} {r.started_at} {r.outcome} "
                           f"({r.status}) session={r.session_id or '-'} "
                           f"request={r.request_id or '-'} tokens {r.tokens_in}/{r.tokens_out}")
        return out


def collect_agent_logs(folder: Path) -> list[AgentLog]:
    """``folder/<host>/<engineer>/``: its ``events.db``, else its ``*.jsonl`` exports."""
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder: give the folder holding <host>/<engineer>/ "
                         "with each engineer's events.db or export")
    logs: list[AgentLog] = []
    for host_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for eng_dir in sorted(p for p in host_dir.iterdir() if p.is_dir()):
            db = eng_dir / "events.db"
            found = [db] if db.is_file() else sorted(eng_dir.glob("*.jsonl"))
            if not found:
                raise ValueError(f"{eng_dir} holds no events.db and no .jsonl export: collect "
                                 f"{eng_dir.name}'s log from {host_dir.name} there, or remove "
                                 "the folder")
            logs.extend(AgentLog(host_dir.name, eng_dir.name, p) for p in found)
    return logs


def _same_host(recorded: str, collected: str) -> bool:
    """A hostname as the session saw it against the name it was collected under
    (a short name and its FQDN are the same host)."""
    a, b = recorded.lower(), collected.lower()
    return a == b or a.split(".")[0] == b.split(".")[0]


def _rows(log: AgentLog) -> list[dict[str, Any]]:
    """The event bodies of one verified log; ValueError with the reason when it does not verify."""
    if log.path.name.endswith(".db"):
        report = verify_log(log.path)
        if not report.ok:
            raise ValueError("; ".join(p.what + (f" (event {p.seq})" if p.seq else "")
                                       for p in report.problems[:3]))
        files = [p for _, p in sealed_segments(log.path)] + [log.path]
        bodies: list[dict[str, Any]] = []
        for f in files:
            conn = open_ro(f)
            try:
                bodies += [json.loads(r[5]) for r in conn.execute(
                    f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq")]
            except sqlite3.Error as exc:
                raise ValueError(f"SQLite says {exc}") from None
            finally:
                conn.close()
        return bodies
    check = verify_export(log.path)
    if not check.ok:
        raise ValueError("; ".join(check.problems[:3]))
    out: list[dict[str, Any]] = []
    with log.path.open(encoding="utf-8") as fh:
        for line in fh:
            value = json.loads(line)
            if isinstance(value, dict) and isinstance(value.get("body"), str):
                out.append(json.loads(value["body"]))
    return out


def join_logs(model_logs: list[Path], agent_logs: list[AgentLog]) -> JoinReport:
    """Verify both sides, then join; problems (exit 2) instead of a partial answer."""
    report = JoinReport(agent_logs=len(agent_logs))
    if not model_logs:
        report.problems.append("no request record given: collect each model host's record "
                               "(or its export) and name it with --requests")
    records: list[tuple[str, StoredRequest]] = []
    for path in model_logs:
        try:
            records += [(path.name, s) for s in read_requests(path)]
        except RequestLogError as exc:
            report.problems.append(str(exc))
    # (host, engineer) -> session id -> request ids of its model turns
    sessions: dict[tuple[str, str], dict[str, set[str]]] = {}
    for log in agent_logs:
        try:
            bodies = _rows(log)
        except (ValueError, OSError) as exc:
            report.problems.append(f"the agent log {log.path} ({log.engineer} on {log.host}) "
                                   f"does not verify: {exc}")
            continue
        mine = sessions.setdefault((log.host, log.engineer), {})
        for body in bodies:
            sid = str(body.get("session_id", ""))
            if body.get("type") == "session_started":
                host, account = str(body.get("host") or ""), str(body.get("account") or "")
                if host and not _same_host(host, log.host):
                    report.problems.append(
                        f"the agent log {log.path} was collected as {log.host}'s, but its "
                        f"session {sid} ran on {host}: put it under {host}/ (an agent log "
                        "from another host would match the wrong engineer's requests)")
                    break
                if account and account != log.engineer:
                    report.problems.append(
                        f"the agent log {log.path} was collected as {log.engineer}'s, but its "
                        f"session {sid} ran as {account}: put it under {log.host}/{account}/")
                    break
                mine.setdefault(sid, set())
            elif body.get("type") == "model_turn" and body.get("request_id"):
                mine.setdefault(sid, set()).add(str(body["request_id"]))
    if report.problems:
        return report
    report.sessions = sum(len(s) for s in sessions.values())
    for source, stored in records:
        r = stored.record
        known = next((s for (host, eng), s in sessions.items()
                      if eng == r.engineer and _same_host(host, r.host)), {})
        verdict: Verdict = "ungoverned"
        if r.engineer == GATE_ENGINEER:
            verdict = "gate"
        elif r.endpoint in LISTING_ENDPOINTS:
            verdict = "listing"
        elif r.session_id is not None and r.session_id in known:
            verdict = "matched" if r.request_id in known[r.session_id] else "in_session"
        report.requests.append(JoinedRequest(stored, source, verdict))
    return report
