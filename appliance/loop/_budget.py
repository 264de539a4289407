"""A budget as a reservation tree: a subagent spends only what it reserved from its parent.

Each run has a :class:`Budget` (tokens, model turns, a wall-clock deadline).
A spawn *reserves* part of what the parent has left; the reservation is
counted as used by the parent at once, so siblings cannot reserve the same
tokens twice and the parent cannot overspend while children run.  When the
child ends, what it really spent moves to the parent (all of it: a child
whose last request went past its reservation is charged for that too) and
the unspent rest goes back.  Cancelling a budget cancels every budget
reserved from it, so one interrupt stops the whole tree.

Siblings share fairly: when one model reply makes several ``task`` calls,
the loop says so (:meth:`Budget.expect`) and each of them reserves at most
its share of what is left, so the fifth of five is not refused because the
first four took the default reservation each.  A reservation is never
smaller than its ``min_tokens`` (what one request of the child needs).
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
                 label: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.tokens = tokens
        self.label = label  # who holds this reservation, named in a refusal
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
        self._expected = 0  # task calls of the current batch still to reserve
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

    def spent(self) -> tuple[int, int]:
        """(tokens, turns) spent here, finished children's included."""
        with self._lock:
            return self.spent_tokens, self.spent_turns

    def reservations(self) -> list[tuple[str, int, int]]:
        """(label, tokens, turns) of each running child's reservation."""
        with self._lock:
            return [(c.label, c.tokens, c.turns) for c in self._children]

    # -- the tree --------------------------------------------------------
    def expect(self, siblings: int) -> None:
        """The next ``siblings`` reservations are one batch: each takes at most its fair share."""
        with self._lock:
            self._expected = max(0, siblings)

    def reserve(self, tokens: int, turns: int, seconds: float, *, label: str = "",
                min_tokens: int = 1, keep_turns: int = 0) -> Budget | None:
        """A child budget of at most what is left here; None when not even a minimum is left.

        ``keep_turns`` stay with this budget (a parent keeps one to read the
        result); ``min_tokens`` is the least a reservation is worth making.
        """
        with self._lock:
            share = max(1, self._expected)
            self._expected = max(0, self._expected - 1)
            left_tokens = self.tokens - self.spent_tokens - self._reserved_tokens
            left_turns = self.turns - self.spent_turns - self._reserved_turns - keep_turns
            left_s = self.deadline - self.clock()
            tokens = min(tokens, max(min_tokens, left_tokens // share), left_tokens)
            turns = min(turns, max(1, left_turns // share), left_turns)
            seconds = min(seconds, left_s)
            if self.cancelled or tokens < max(1, min_tokens) or turns < 1 or seconds <= 0:
                return None
            self._reserved_tokens += tokens
            self._reserved_turns += turns
            child = Budget(tokens, turns, seconds, parent=self, label=label, clock=self.clock)
            self._children.append(child)
            return child

    def charge(self, tokens: int = 0, turns: int = 0) -> None:
        """Record spend here; a child's spend stays inside its reservation until release."""
        with self._lock:
            self.spent_tokens += tokens
            self.spent_turns += turns

    def release(self) -> None:
        """The child ended: all it spent moves to the parent, the unspent rest is given back."""
        parent = self.parent
        if parent is None:
            return
        with parent._lock:
            if self not in parent._children:
                return
            parent._children.remove(self)
            parent._reserved_tokens -= self.tokens
            parent._reserved_turns -= self.turns
            parent.spent_tokens += self.spent_tokens
            parent.spent_turns += self.spent_turns

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
