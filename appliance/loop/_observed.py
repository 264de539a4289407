"""A session that tells listeners about every event it records.

The loop, the dispatcher and the approval path all append through the
session, so listening here sees each event exactly once, in log order, right
after it is persisted: what ``abhed run --json`` prints and ``abhed rpc`` streams.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from appliance._session import Session
from appliance.events import Event, StoredEvent

__all__ = ["ObservedSession"]


class ObservedSession(Session):
    """A :class:`Session` whose ``append`` notifies ``listeners`` (thread-safe)."""

    listeners: list[Callable[[StoredEvent], None]]
    child_listeners: list[Callable[[StoredEvent], None]]
    _append_lock: threading.Lock

    def _ensure(self) -> None:
        if not hasattr(self, "listeners"):
            self.listeners = []
            self.child_listeners = []
            self._append_lock = threading.Lock()

    def listen(self, fn: Callable[[StoredEvent], None], *, children: bool = False) -> None:
        """Call ``fn`` after each event; ``children``: subagents' events too (a front end's stream)."""
        self._ensure()
        self.listeners.append(fn)
        if children:
            self.child_listeners.append(fn)

    def adopt(self, child: ObservedSession) -> None:
        """Relay a subagent session's events to the listeners that asked for children's."""
        self._ensure()

        def relay(stored: StoredEvent) -> None:
            for fn in list(self.child_listeners):
                fn(stored)

        child.listen(relay, children=True)

    def append(self, event: Event) -> StoredEvent:
        self._ensure()
        with self._append_lock:
            stored = super().append(event)
            for fn in list(self.listeners):
                fn(stored)
        return stored
