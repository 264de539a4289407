"""The event log's maintenance: verifying, exporting, repairing, pruning it, and the head witness.

Kept out of :mod:`appliance.events` itself because only the doors that look
after the log need it (``abhed events verify / export / verify-export / repair /
prune / witness collect``, ``abhed doctor``, the auditor's join in
:mod:`appliance.events.requests`): a tool call appends to the event log without
importing it (docs/performance.md, "Seventh pass").  The store's rare paths
(:meth:`EventStore.verify`) import it where they run.

Public surface: :func:`verify_log` → :class:`VerifyReport` of :class:`Problem`;
:func:`export_log` (``EXPORT_FORMATS``), :func:`verify_export` → :class:`ExportCheck`,
:func:`consistency_problems`; :func:`repair_log` → :class:`RepairResult`;
:func:`prune_segments`; the witness's :func:`collect_heads` and :func:`check_witness`
(the engineer's side, posting heads, is the store's).

Errors: ``appliance.EventLogError`` and its kin (``ChainBroken``, ``EventLogDamaged``);
a verification reports its problems in :class:`VerifyReport` rather than raising.
"""

from appliance.events.maintenance._export import (
    EXPORT_FORMATS,
    ExportCheck,
    consistency_problems,
    export_log,
    verify_export,
)
from appliance.events.maintenance._repair import RepairResult, repair_log
from appliance.events.maintenance._retention import prune_segments
from appliance.events.maintenance._verify import Problem, VerifyReport, verify_log
from appliance.events.maintenance._witnessed import check_witness, collect_heads

__all__ = [
    "EXPORT_FORMATS",
    "ExportCheck",
    "Problem",
    "RepairResult",
    "VerifyReport",
    "check_witness",
    "collect_heads",
    "consistency_problems",
    "export_log",
    "prune_segments",
    "repair_log",
    "verify_export",
    "verify_log",
]
