"""Events and the tamper-evident store they are persisted in.

The event classes (``_models``) and the words an event is shown in (``_shown``) are
re-exported whole, by their modules' own ``__all__``: each name is listed once, where it
is defined, and the event roster itself is the union (``EVENT_CLASSES``).
"""

from appliance.events import _models, _shown
from appliance.events._export import (
    EXPORT_FORMATS,
    ExportCheck,
    consistency_problems,
    export_log,
    verify_export,
)
from appliance.events._forward import Forwarder
from appliance.events._models import *  # noqa: F403  (its __all__: the event classes)
from appliance.events._ocsf import request_record
from appliance.events._redact import REDACTED, Redactor, passage_record
from appliance.events._repair import RepairResult, repair_log
from appliance.events._retention import prune_segments
from appliance.events._settings import EventLogSettings, ForwardSettings
from appliance.events._shown import *  # noqa: F403  (its __all__: events as a person reads them)
from appliance.events._store import GENESIS, EventStore, StoredEvent
from appliance.events._verify import Problem, VerifyReport, verify_log
from appliance.events._witness import check_witness, collect_heads

__all__ = [
    "Forwarder",
    "request_record",
    "EXPORT_FORMATS",
    "GENESIS",
    "REDACTED",
    "EventLogSettings",
    "ForwardSettings",
    "EventStore",
    "ExportCheck",
    "Problem",
    "Redactor",
    "passage_record",
    "RepairResult",
    "StoredEvent",
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
__all__ += _models.__all__
__all__ += _shown.__all__
