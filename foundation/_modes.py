"""The policy modes, in one ordered type, and the one answer to "is this mode stricter?".

A leaf, so that the doors (``abhed tui``'s ``--mode``, the TUI's ``/mode``)
can name the modes without loading the runtime before the first frame, and
policy (``resolve_mode``) and the layered config (a user's ``policy.mode``
under the site's) rank them by the same order.

plan: read-only tools only.  ask: every mutation no allow rule covers asks.
auto: what no rule, destructive pattern or extension stops runs.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["MODES", "Mode", "as_mode", "modes_no_looser", "stricter_or_equal"]

Mode = Literal["plan", "ask", "auto"]
"""The one mode type: policy, the loop, the command line, rpc and the TUI all use it."""

MODES: tuple[Mode, ...] = ("plan", "ask", "auto")
"""Every mode, strictest first: the order the docs, ``--help`` and every error list them in."""


def stricter_or_equal(mode: Mode, than: Mode) -> bool:
    """``plan`` is stricter than ``ask``, which is stricter than ``auto``."""
    return MODES.index(mode) <= MODES.index(than)


def modes_no_looser(than: Mode) -> tuple[Mode, ...]:
    """The modes a caller may choose under ``than`` (strictest first)."""
    return tuple(m for m in MODES if stricter_or_equal(m, than))


def as_mode(value: object) -> Mode | None:
    """``value`` as a :data:`Mode`, or ``None`` when it names none (input from a door)."""
    for mode in MODES:
        if value == mode:
            return mode
    return None
