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
    _append_lock: threading.Lock

    def _ensure(self) -> None:
        if not hasattr(self, "listeners"):
            self.listeners = []
            self._append_lock = threading.Lock()

    def listen(self, fn: Callable[[StoredEvent], None]) -> None:
        self._ensure()
        self.listeners.append(fn)

    def append(self, event: Event) -> StoredEvent:
        self._ensure()
        with self._append_lock:
            stored = super().append(event)
            for fn in list(self.listeners):
                fn(stored)
        return stored
