"""Veto-only extensions: separate processes speaking JSONL on stdin/stdout.

An extension may block, ask, rewrite arguments or results, drop messages,
add to the system prompt, log, and provide tools.  It can never allow.
Combination is toward the stricter answer and independent of load order.
See docs/extensions.md.

Errors: :class:`ExtensionError` (under ``AbhedError``) > :class:`DuplicateTool`.

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from appliance.extensions._errors import DuplicateTool, ExtensionError
    from appliance.extensions._host import ExtensionHost
    from appliance.extensions._protocol import FIELDS, Reply, read_reply
    from appliance.extensions._settings import EVENTS, ExtensionSpec
    from appliance.extensions._tools import ProvidedTool

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "DuplicateTool": "appliance.extensions._errors",
    "EVENTS": "appliance.extensions._settings",
    "ExtensionError": "appliance.extensions._errors",
    "ExtensionHost": "appliance.extensions._host",
    "ExtensionSpec": "appliance.extensions._settings",
    "FIELDS": "appliance.extensions._protocol",
    "ProvidedTool": "appliance.extensions._tools",
    "read_reply": "appliance.extensions._protocol",
    "Reply": "appliance.extensions._protocol",
}

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

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
