"""Events and the tamper-evident store they are persisted in."""

from appliance.events._models import (
    EVENT_ADAPTER,
    SCHEMA_VERSION,
    ActionEvent,
    ApprovalEvent,
    Event,
    ModelTurn,
    ObservationEvent,
    RunEndReason,
    RunEnded,
    RunStarted,
    SessionEnded,
    SessionStarted,
    TurnToolCall,
    TurnUsage,
    UserMessage,
    now_iso,
)
from appliance.events._store import GENESIS, EventStore, StoredEvent

__all__ = [
    "EVENT_ADAPTER",
    "GENESIS",
    "SCHEMA_VERSION",
    "ActionEvent",
    "ApprovalEvent",
    "Event",
    "EventStore",
    "ModelTurn",
    "ObservationEvent",
    "RunEndReason",
    "RunEnded",
    "RunStarted",
    "SessionEnded",
    "SessionStarted",
    "StoredEvent",
    "TurnToolCall",
    "TurnUsage",
    "UserMessage",
    "now_iso",
]
