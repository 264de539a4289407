"""The appliance's one error root.

    AbhedError
    ├── ConfigError        config.json missing pieces, malformed, or refused
    ├── EventLogError      the event store cannot be opened or written
    │   └── ChainBroken    verification found an altered, missing or reordered event
    └── SessionNotFound    no session with that id

Tool failures are not here: they are results (``tools.ToolResult``), never
exceptions, because the model must read them.
"""

from __future__ import annotations

__all__ = ["AbhedError", "ChainBroken", "ConfigError", "EventLogError", "SessionNotFound"]


class AbhedError(Exception):
    """Root of every error the appliance raises on purpose."""


class ConfigError(AbhedError):
    pass


class EventLogError(AbhedError):
    pass


class ChainBroken(EventLogError):
    def __init__(self, seq: int, reason: str) -> None:
        super().__init__(f"event {seq}: {reason}")
        self.seq = seq
        self.reason = reason


class SessionNotFound(AbhedError):
    pass
