"""Subagents for the ``task`` tool: profiles, a shared file ledger, the spawner.

Public surface: :class:`Subagents` (one per parent agent; ``start_agent``
wires it), :data:`SUMMARY_MAX_CHARS`.
"""

from appliance.tasks._spawner import SUMMARY_MAX_CHARS, Subagents

__all__ = ["SUMMARY_MAX_CHARS", "Subagents"]
