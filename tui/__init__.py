"""The Abhed terminal UI (Textual): ``abhed`` / ``abhed tui`` (docs/tui.md).

Public surface: :class:`AbhedApp` (the app), :class:`AgentLink` (its one
seam to the appliance, which tests may replace), and :func:`run_tui`.  The
package depends on ``appliance`` and holds no agent logic: it renders the
session's events and the model's streamed text, and relays the person's
answers, steers and interrupts through the calls ``abhed rpc`` uses.
"""

from __future__ import annotations

from tui._app import AbhedApp, run_tui, tune_gc
from tui._link import AgentLink

__all__ = ["AbhedApp", "AgentLink", "run_tui", "tune_gc"]
