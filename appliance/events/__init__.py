"""Events and the tamper-evident store they are persisted in."""

from appliance.events._models import (
    EVENT_ADAPTER,
    SCHEMA_VERSION,
    ActionEvent,
    Event,
    ObservationEvent,
    SessionEnded,
    SessionStarted,
    now_iso,
)
from appliance.events._store import GENESIS, EventStore, StoredEvent

__all__ = [
    "EVENT_ADAPTER",
    "GENESIS",
    "SCHEMA_VERSION",
    "ActionEvent",
    "Event",
    "EventStore",
    "ObservationEvent",
    "SessionEnded",
    "SessionStarted",
    "StoredEvent",
    "now_iso",
]
