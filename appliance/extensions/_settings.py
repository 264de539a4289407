"""The ``extensions`` section of ``ABHED_HOME/config.json``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["EVENTS", "ExtensionSpec"]

# Every event an extension can subscribe to (docs/extensions.md describes each).
EVENTS: tuple[str, ...] = ("session_start", "tool_call", "tool_result", "before_send",
                           "system_prompt", "list_tools", "invoke_tool", "session_end")


class ExtensionSpec(BaseModel):
    """One extension: a process speaking JSONL on stdin/stdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,40}$", description="Unique; names it in the log.")
    command: str = Field(min_length=1, description="Program to start (looked up on PATH).")
    args: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list, description="Subscribed events; none = all.")
    timeout_ms: int = Field(default=5000, ge=1, le=600_000,
                            description="Longest wait for one reply; past it the extension is dead.")
    env: dict[str, str] = Field(default_factory=dict, description="Added to the inherited environment.")

    @field_validator("events")
    @classmethod
    def _known_events(cls, value: list[str]) -> list[str]:
        unknown = [e for e in value if e not in EVENTS]
        if unknown:
            raise ValueError(f"unknown events {unknown}; known: {', '.join(EVENTS)}")
        return value
