"""Tools an extension provides: tools like any other, checked against their declared schema.

A provided tool passes through the same dispatch path as a built-in (policy,
approval, events).  It needs the ``extension`` capability, and one that does
not say ``"mutates": false`` is treated as mutating, because Abhed cannot know
what someone else's tool does and the safe default is the one that asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from tools import SchemaTool, ToolContext, ToolResult, cap_text

if TYPE_CHECKING:
    from appliance.extensions._host import ExtensionHost

__all__ = ["ProvidedTool", "make_provided_tool"]

class ProvidedTool(SchemaTool):
    """Base of the classes made per provided tool (one class each, so ``spec()`` works)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"extension"})
    extension: ClassVar[str] = ""
    host: ClassVar[ExtensionHost | None] = None

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        assert self.host is not None
        result = self.host.invoke(self.name, "", self.checked_values(args))
        content, truncated = cap_text(result.content)
        if truncated:
            result = result.model_copy(update={"content": content, "truncated": True})
        return result


def make_provided_tool(spec: dict[str, Any], extension: str, host: ExtensionHost) -> ProvidedTool:
    """A tool instance for one entry of a ``list_tools`` reply."""
    name = str(spec["name"])
    schema = spec.get("schema", spec.get("input_schema", spec.get("parameters")))
    if not isinstance(schema, dict):
        schema = {"type": "object"}
    description = spec.get("description")
    cls = type(f"Provided_{name}", (ProvidedTool,), {
        "name": name,
        "description": str(description)[:2000] if description else f"{name} (from extension {extension})",
        "schema": schema,
        "mutates": spec.get("mutates") is not False,  # unsaid means mutating
        "extension": extension,
        "source": f"extension:{extension}",
        "host": host,
    })
    tool = cls()
    assert isinstance(tool, ProvidedTool)
    return tool
