"""Events and the tamper-evident store they are persisted in.

The event classes (``_models``) and the words an event is shown in (``_shown``) are
re-exported whole, by their modules' own ``__all__``: each name is listed once, where it
is defined, and the event roster itself is the union (``EVENT_CLASSES``).

The log's maintenance (verifying, exporting, repairing, pruning it, the head
witness's collector) is :mod:`appliance.events.maintenance`, and the auditor's
join of the model service's records :mod:`appliance.events.requests`: public
subpackages this module does not import, so that a tool call, which only appends,
loads neither (docs/performance.md, "Seventh pass").
"""

from appliance.events import _models, _shown
from appliance.events._forward import Forwarder
from appliance.events._models import *  # noqa: F403  (its __all__: the event classes)
from appliance.events._ocsf import request_record
from appliance.events._redact import REDACTED, Redactor, passage_record
from appliance.events._settings import EventLogSettings, ForwardSettings
from appliance.events._shown import *  # noqa: F403  (its __all__: events as a person reads them)
from appliance.events._store import GENESIS, EventStore, StoredEvent

__all__ = [
    "Forwarder",
    "request_record",
    "GENESIS",
    "REDACTED",
    "EventLogSettings",
    "ForwardSettings",
    "EventStore",
    "Redactor",
    "passage_record",
    "StoredEvent",
]
__all__ += _models.__all__
__all__ += _shown.__all__
