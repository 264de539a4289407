"""The events a session records: a versioned discriminated union.

Every event carries ``type`` (the discriminator), ``schema_version`` and the
``session_id``/``ts`` envelope.  Old rows are upgraded on read by
:func:`migrate`, so readers only ever see the current shape.  The union is
what a UI renders and what a conformance probe scores, so every field is
meant to be read by a program, not just a person.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tools import ToolResult

__all__ = [
    "SCHEMA_VERSION",
    "ActionEvent",
    "Event",
    "EVENT_ADAPTER",
    "ObservationEvent",
    "SessionEnded",
    "SessionStarted",
    "migrate",
    "now_iso",
]

SCHEMA_VERSION = 1


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    session_id: str
    ts: str = Field(default_factory=now_iso, description="UTC, ISO 8601 with microseconds.")


class SessionStarted(_Base):
    """A session began: where it works and with what."""

    type: Literal["session_started"] = "session_started"
    workspace: str
    abhed_version: str
    settings: dict[str, Any] = Field(default_factory=dict)


class ActionEvent(_Base):
    """A tool call as the model (or caller) asked for it, recorded before anything runs."""

    type: Literal["action"] = "action"
    call_id: str
    tool: str
    args: Any = Field(description="The arguments exactly as given; may be malformed.")
    source: str = Field(default="model", description="Who asked: model, cli, rpc, subagent.")


class ObservationEvent(_Base):
    """What a tool call produced, recorded before the result reaches the model."""

    type: Literal["observation"] = "observation"
    call_id: str
    tool: str
    result: ToolResult
    duration_ms: float


class SessionEnded(_Base):
    type: Literal["session_ended"] = "session_ended"
    reason: str


Event = Annotated[
    SessionStarted | ActionEvent | ObservationEvent | SessionEnded,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def migrate(raw: dict[str, Any]) -> dict[str, Any]:
    """Upgrade a stored event body to the current schema version.

    Version 1 is the first; each future version adds one step here, so an
    old log stays readable forever (the stored bytes, and so the hash chain,
    are never rewritten).
    """
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(f"unsupported event schema_version {version!r}")
    return raw
