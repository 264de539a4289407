"""Subagents for the ``task`` tool: profiles, a shared file ledger, the spawner.

Public surface: :class:`SubagentSpawner` (one per parent agent; ``appliance.compose``
makes it and binds it), :class:`ChildAssembly` (what the composition gives it
to build each child), :data:`SUMMARY_MAX_CHARS`.
"""

from appliance.tasks._spawner import SUMMARY_MAX_CHARS, ChildAssembly, SubagentSpawner

__all__ = ["SUMMARY_MAX_CHARS", "ChildAssembly", "SubagentSpawner"]
