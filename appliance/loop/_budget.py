"""A budget as a reservation tree: a subagent spends only what it reserved from its parent.

Each run has a :class:`Budget` (tokens, model turns, a wall-clock deadline).
A spawn *reserves* part of what the parent has left; the reservation is
counted as used by the parent at once, so siblings cannot reserve the same
tokens twice and the parent cannot overspend while children run.  Spend
rolls up live (``charge`` walks to the root), and when the child ends its
unspent reservation goes back.  Cancelling a budget cancels every budget
reserved from it, so one interrupt stops the whole tree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["BUDGET_LIMIT_REACHED", "Budget"]

#: The words the specification asks for (§8), exactly.
BUDGET_LIMIT_REACHED = "Budget limit reached"


class Budget:
    """Tokens, turns and time for one run; thread-safe."""

    def __init__(self, tokens: int, turns: int, seconds: float, *, parent: Budget | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tokens = tokens
        self.turns = turns
        self.clock = clock
        self.deadline = clock() + seconds
        self.parent = parent
        self.spent_tokens = 0
        self.spent_turns = 0
        self._reserved_tokens = 0
        self._reserved_turns = 0
        self._children: list[Budget] = []
        self._lock = threading.Lock()
        self._on_cancel: list[Callable[[], None]] = []
        self.cancelled = False

    # -- reading ---------------------------------------------------------
    def left_tokens(self) -> int:
        with self._lock:
            return self.tokens - self.spent_tokens - self._reserved_tokens

    def left_turns(self) -> int:
        with self._lock:
            return self.turns - self.spent_turns - self._reserved_turns

    def left_seconds(self) -> float:
        return self.deadline - self.clock()

    # -- the tree --------------------------------------------------------
    def reserve(self, tokens: int, turns: int, seconds: float) -> Budget | None:
        """A child budget of at most what is left here; None when not even a minimum is left."""
        with self._lock:
            left_tokens = self.tokens - self.spent_tokens - self._reserved_tokens
            left_turns = self.turns - self.spent_turns - self._reserved_turns
            left_s = self.deadline - self.clock()
            tokens, turns, seconds = min(tokens, left_tokens), min(turns, left_turns), min(seconds, left_s)
            if self.cancelled or tokens < 1 or turns < 1 or seconds <= 0:
                return None
            self._reserved_tokens += tokens
            self._reserved_turns += turns
            child = Budget(tokens, turns, seconds, parent=self, clock=self.clock)
            self._children.append(child)
            return child

    def charge(self, tokens: int = 0, turns: int = 0) -> None:
        """Record spend here; a child's spend stays inside its reservation until release."""
        with self._lock:
            self.spent_tokens += tokens
            self.spent_turns += turns

    def release(self) -> None:
        """The child ended: its real spend moves to the parent, the rest is given back."""
        parent = self.parent
        if parent is None:
            return
        with parent._lock:
            if self not in parent._children:
                return
            parent._children.remove(self)
            parent._reserved_tokens -= self.tokens
            parent._reserved_turns -= self.turns
            parent.spent_tokens += min(self.spent_tokens, self.tokens)
            parent.spent_turns += min(self.spent_turns, self.turns)

    def on_cancel(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when this budget is cancelled (at once if it already is)."""
        with self._lock:
            if not self.cancelled:
                self._on_cancel.append(fn)
                return
        fn()

    def cancel(self) -> None:
        """Cancel this budget and, as a cascade, every budget reserved from it."""
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            children, callbacks = list(self._children), list(self._on_cancel)
        for child in children:
            child.cancel()
        for fn in callbacks:
            fn()
