"""Veto-only extensions: separate processes speaking JSONL on stdin/stdout.

An extension may block, ask, rewrite arguments or results, drop messages,
add to the system prompt, log, and provide tools.  It can never allow.
Combination is toward the stricter answer and independent of load order.
See docs/extensions.md.

Errors: :class:`ExtensionError` (under ``AbhedError``) > :class:`DuplicateTool`.
"""

from __future__ import annotations

from appliance.extensions._errors import DuplicateTool, ExtensionError
from appliance.extensions._host import ExtensionHost
from appliance.extensions._protocol import FIELDS, Reply, read_reply
from appliance.extensions._settings import EVENTS, ExtensionSpec
from appliance.extensions._tools import ProvidedTool

__all__ = [
    "EVENTS",
    "FIELDS",
    "DuplicateTool",
    "ExtensionError",
    "ExtensionHost",
    "ExtensionSpec",
    "ProvidedTool",
    "Reply",
    "read_reply",
]
