"""The extensions package's error root.

    AbhedError
    └── ExtensionError       extensions cannot be set up as configured
        └── DuplicateTool    two sources provide a tool with the same name

A crashed, hung or nonsensical extension is not an error: it is marked dead,
recorded as an ``extension_died`` event, and the session goes on.
"""

from __future__ import annotations

from appliance._errors import AbhedError

__all__ = ["DuplicateTool", "ExtensionError"]


class ExtensionError(AbhedError):
    pass


class DuplicateTool(ExtensionError):
    pass
