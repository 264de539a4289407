"""The model service's request records beside the event log: the auditor's join, their export.

Kept out of :mod:`appliance.events` itself because it reads the model service's
records (:mod:`models`), which nothing that writes events needs: a tool call
appends to the event log without importing the model services
(docs/performance.md).  ``abhed events join`` and ``abhed events
export-requests`` are its doors (docs/event-log.md).

Public surface: :func:`collect_agent_logs` and :func:`join_logs` →
:class:`JoinReport` of :class:`JoinedRequest` (each engineer's log an
:class:`AgentLog`), and :func:`export_requests` (JSONL or OCSF).

Errors: what the parts raise (``appliance.EventLogError``, ``models.RequestLogError``);
a join reports its problems in :class:`JoinReport` rather than raising.
"""

from appliance.events.requests._export import export_requests
from appliance.events.requests._join import (
    AgentLog,
    JoinedRequest,
    JoinReport,
    collect_agent_logs,
    join_logs,
)

__all__ = [
    "AgentLog",
    "JoinReport",
    "JoinedRequest",
    "collect_agent_logs",
    "export_requests",
    "join_logs",
]
