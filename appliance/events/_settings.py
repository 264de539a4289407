"""The operator's settings for the event log (``config.json`` → ``events``)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["EventLogSettings"]


class EventLogSettings(BaseModel):
    """Disk reserve and rotation; retention is a separate, recorded act (``abhed events prune``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reserve_mb: int = Field(
        default=64, ge=0,
        description="Free space (MiB) that must remain on the log's file system for a new run, "
                    "rpc server or tool call to start (auditd's space_left). 0: no reserve.")
    rotate_mb: int = Field(
        default=64, ge=0,
        description="Seal the active segment and start a new one once it reaches this size "
                    "(MiB). 0: never by size.")
    redact: tuple[str, ...] = Field(
        default=(), max_length=1000,
        description="Regular expressions (Python syntax) replaced by [redacted] in every event "
                    "before it is written: arguments, results, details, error text, the model's "
                    "text. Applied to the rpc stream and exports too, since both come from the log.")
    witness_dir: str | None = Field(
        default=None,
        description="A shared host's head witness (docs/event-log.md, 'A shared host'): each "
                    "store posts its head to WITNESS/inbox when it closes after appending, and "
                    "new work is refused while the inbox cannot take one.")
    rotate_days: int = Field(
        default=0, ge=0,
        description="Seal the active segment once it is this many days old. 0: never by age.")

    @field_validator("redact")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for p in patterns:
            if not p or len(p) > 10_000:
                raise ValueError("each redact pattern must be 1 to 10000 characters")
            try:
                if re.compile(p).match(""):
                    raise ValueError(f"redact pattern {p!r} matches the empty string")
            except re.error as exc:
                raise ValueError(f"redact pattern {p!r} is not a regular expression: {exc}") from None
        return patterns
