"""One file ledger for a parent and its subagents: who last wrote which content.

Each agent keeps its own *seen* hashes (its session's events), so a child
must read a file itself before changing it, and a write by a sibling makes
everyone else's view stale (``write``/``edit`` compare the file's hash with
the seen one).  What this adds is the name: the tree records the content
hash each write left and who wrote it, so a stale edit is refused *naming
the sibling task*, and the model knows whom its change would have clobbered.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from appliance._session import Session
from appliance.events import ObservationEvent, StoredEvent

__all__ = ["AgentLedger", "TreeLedger"]


class TreeLedger:
    """path -> (sha256 after the write, who wrote it), for one agent tree."""

    def __init__(self) -> None:
        self._writes: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def watch(self, session: Session, who: str) -> None:
        """Record every successful write/edit ``session`` makes as ``who``'s."""
        listen = getattr(session, "listen", None)
        if not callable(listen):
            return

        def on_event(stored: StoredEvent) -> None:
            e = stored.event
            if isinstance(e, ObservationEvent) and e.result.ok and e.tool in ("write", "edit"):
                state = e.result.details.get("file_state")
                if isinstance(state, dict) and isinstance(state.get("path"), str):
                    with self._lock:
                        self._writes[state["path"]] = (str(state.get("sha256")), who)

        listen(on_event)

    def who(self, path: str, sha256: str) -> str | None:
        with self._lock:
            hit = self._writes.get(path)
        return hit[1] if hit is not None and hit[0] == sha256 else None


class AgentLedger:
    """One agent's view: its own seen hashes, and the tree's record of who changed a file."""

    def __init__(self, session: Session, tree: TreeLedger, me: str) -> None:
        self.session = session
        self.tree = tree
        self.me = me

    def seen_hash(self, path: str) -> str | None:
        return self.session.seen_hash(path)

    def recalled(self, kind: Literal["todo", "plan"]) -> Any:
        """This agent's own todo list or plan (``tools.todo.WorkingMemory``)."""
        return self.session.recalled(kind)

    def changed_by(self, path: str, sha256: str) -> str | None:
        who = self.tree.who(path, sha256)
        return who if who is not None and who != self.me else None
