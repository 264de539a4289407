"""The operator's settings for the event log (``config.json`` → ``events``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EventLogSettings"]


class EventLogSettings(BaseModel):
    """Disk reserve and rotation; retention is a separate, recorded act (``abhed events prune``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reserve_mb: int = Field(
        default=64, ge=0,
        description="Free space (MiB) that must remain on the log's file system for a new run, "
                    "rpc server or tool call to start (auditd's space_left). 0: no reserve.")
    rotate_mb: int = Field(
        default=256, ge=0,
        description="Seal the active segment and start a new one once it reaches this size "
                    "(MiB). 0: never by size.")
    witness_dir: str | None = Field(
        default=None,
        description="A shared host's head witness (docs/event-log.md, 'A shared host'): each "
                    "store posts its head to WITNESS/inbox when it closes after appending, and "
                    "new work is refused while the inbox cannot take one.")
    rotate_days: int = Field(
        default=0, ge=0,
        description="Seal the active segment once it is this many days old. 0: never by age.")
