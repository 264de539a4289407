"""The appliance's one error root.

    AbhedError
    ├── ConfigError            config.json missing pieces, malformed, or refused
    │                          (also: a tool name offered by two sources)
    ├── EventLogError          the event store cannot be opened or written
    │   ├── EventLogDamaged    the file or its chain is damaged: every door refuses it
    │   │   └── ChainBroken    verification found an altered, missing or reordered event
    │   └── EventLogFull       the disk holding the log is (nearly) full
    ├── SessionNotFound        no session with that id
    ├── SessionBusy            another process is working on that session
    ├── PolicyError            (appliance.policy) policy refused to set up a run as asked
    │   └── ModeRefused        a mode looser than the operator's policy.mode
    ├── ExtensionError         (appliance.extensions) an extension cannot be used
    │   └── DuplicateTool      two extensions (or one and a built-in) offer one tool name
    ├── McpError               (appliance.mcp) an MCP server refused or unusable
    └── SandboxError           (appliance.sandbox) the shell sandbox failed
        ├── SandboxUnavailable no backend can run here
        └── SandboxCrashed     the sandbox died under a command

Each subpackage defines its own branch in its ``_errors`` module and exports
it; catching :class:`AbhedError` at a door catches them all.

Tool failures are not here: they are results (``tools.ToolResult``), never
exceptions, because the model must read them.
"""

from __future__ import annotations

__all__ = ["AbhedError", "ChainBroken", "ConfigError", "EventLogDamaged", "EventLogError",
           "EventLogFull", "SessionBusy", "SessionNotFound"]


class AbhedError(Exception):
    """Root of every error the appliance raises on purpose."""


class ConfigError(AbhedError):
    pass


class EventLogError(AbhedError):
    pass


class EventLogDamaged(EventLogError):
    """The log cannot be trusted as it is; the message says what, and how to repair it.

    Raised where the store is opened or read, so every door (run, rpc, tool,
    sessions, the TUI, the installer's gate) refuses with the same sentence
    instead of a traceback or a silently fresh log.
    """

    def __init__(self, path: str, what: str, seq: int | None = None) -> None:
        where = f" at event {seq}" if seq is not None else ""
        super().__init__(
            f"the event log {path} is damaged{where}: {what}. Nothing was changed. "
            "Run `abhed events verify` for details and `abhed events repair` to salvage every "
            "event that still verifies into a new log (the damaged file is kept as evidence)."
        )
        self.path = path
        self.what = what
        self.seq = seq


class ChainBroken(EventLogDamaged):
    def __init__(self, seq: int, reason: str, path: str = "") -> None:
        EventLogError.__init__(self, f"event {seq}: {reason}")
        self.path = path
        self.what = reason
        self.seq = seq
        self.reason = reason


class EventLogFull(EventLogError):
    """The disk holding the log is full, or below the reserve kept for it."""


class SessionNotFound(AbhedError):
    pass


class SessionBusy(AbhedError):
    """Another live process holds the session (a run, rpc, the TUI, an undo): refused, not
    queued, since two writers would each take the other's unfinished run for a crash."""
