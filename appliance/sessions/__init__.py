"""What a session keeps beside its events: artifacts (cut outputs, preimages) and undo.

Public surface: :class:`ArtifactStore`, :func:`undo` and :class:`UndoError`.
"""

from appliance.sessions._artifacts import ArtifactStore
from appliance.sessions._undo import UndoError, undo

__all__ = ["ArtifactStore", "UndoError", "undo"]
