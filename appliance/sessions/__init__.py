"""What a session keeps beside its events: artifacts (cut outputs, preimages) and undo.

Public surface: :class:`ArtifactStore`; :func:`effects_of` (what a session's events show it
changed and ran: a subagent's measured result); undo as a history: :func:`undo`, :func:`redo`,
:func:`undo_history` (what the next undo or redo would do, for a door to show) and
:class:`UndoError`.
"""

from appliance.sessions._artifacts import ArtifactStore
from appliance.sessions._effects import Effects, effects_of
from appliance.sessions._undo import UndoError, UndoHistory, redo, undo, undo_history

__all__ = ["ArtifactStore", "Effects", "UndoError", "UndoHistory", "effects_of", "redo", "undo",
           "undo_history"]
