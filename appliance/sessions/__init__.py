"""What a session keeps beside its events: artifacts (cut outputs, preimages) and undo.

Public surface: :class:`ArtifactStore` and :func:`undo`.
"""

from appliance.sessions._artifacts import ArtifactStore

__all__ = ["ArtifactStore"]
