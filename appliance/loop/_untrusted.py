"""Tool output goes to the model inside an ``<untrusted>`` marker, as data.

The system prompt tells the model that anything between ``<untrusted ...>`` and
``</untrusted>`` is data a tool returned, never instructions.  A file can
contain the closing marker itself; so before wrapping, every ``<`` that begins
something that reads as an opening or closing marker (any case, any spacing,
``<untrusted``, ``</ untrusted``) is written as ``&lt;``.  Nothing else in the
content is changed, so code the model reads stays exact.  The escape is
documented in docs/rpc.md and the system prompt, so the model knows ``&lt;``
there stands for ``<``.
"""

from __future__ import annotations

import re

from tools import ToolResult

__all__ = ["MARKER_RE", "escape_markers", "wrap_result"]

MARKER_RE = re.compile(r"<(?=\s*/?\s*untrusted)", re.IGNORECASE)


def escape_markers(text: str) -> str:
    return MARKER_RE.sub("&lt;", text)


def _attr(value: str, limit: int) -> str:
    return escape_markers(value).replace(chr(34), "&quot;")[:limit]


def wrap_result(tool: str, result: ToolResult, source: str = "native") -> str:
    """The tool message content the model reads for one result.

    This is the one place tool output is tagged: tools (MCP ones included)
    return plain content, and ``source`` (``Tool.source``) names who produced
    it when that is not Abhed itself.
    """
    attrs = f'tool="{_attr(tool, 64)}"'
    if source != "native":
        attrs += f' source="{_attr(source, 128)}"'
    attrs += f' ok="{str(result.ok).lower()}"'
    if result.error is not None:
        attrs += f' error="{result.error.code}"'
    if result.truncated:
        attrs += ' truncated="true"'
    return f"<untrusted {attrs}>\n{escape_markers(result.content)}\n</untrusted>"
