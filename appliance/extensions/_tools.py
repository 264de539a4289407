"""Tools an extension provides: tools like any other, checked against their declared schema.

A provided tool passes through the same dispatch path as a built-in (policy,
approval, events).  It needs the ``extension`` capability, and one that does
not say ``"mutates": false`` is treated as mutating, because Abhed cannot know
what someone else's tool does and the safe default is the one that asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ConfigDict

from tools import Tool, ToolContext, ToolFailure, ToolResult
from tools._tool import Args

if TYPE_CHECKING:
    from appliance.extensions._host import ExtensionHost

__all__ = ["ProvidedTool", "SchemaTool", "cap_text", "check_json_schema", "make_provided_tool"]

MAX_CONTENT_CHARS = 30_000


class FreeArgs(Args):
    """Any JSON object; the declared JSON schema is checked in ``check_args``."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


def check_json_schema(tool: str, schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Raise ``ToolFailure`` naming every way ``args`` breaks ``schema``."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    except (jsonschema.SchemaError, RecursionError) as exc:
        raise ToolFailure("tool_schema_invalid", f"{tool} declares a schema that cannot be "
                          f"used ({str(exc)[:200]}); it cannot be called. Tell the user.") from None
    if errors:
        problems = "; ".join(f"`{'.'.join(str(p) for p in e.path) or '(arguments)'}`: "
                             f"{e.message[:200]}" for e in errors[:10])
        raise ToolFailure("invalid_arguments", f"Invalid arguments for {tool}: {problems}. "
                          "Nothing was run; fix and call again.")


def cap_text(text: str) -> tuple[str, bool]:
    """``text`` cut to the content cap, with a note saying how much was left out."""
    if len(text) <= MAX_CONTENT_CHARS:
        return text, False
    cut = len(text) - MAX_CONTENT_CHARS
    return (text[:MAX_CONTENT_CHARS]
            + f"\n[truncated: {cut} more characters; ask the tool for less, e.g. a narrower query]",
            True)


class SchemaTool(Tool):
    """A tool someone else defined (an extension's, an MCP server's): any JSON object in,
    checked against the JSON schema it declared, which is also what the model is shown."""

    args_model = FreeArgs
    schema: ClassVar[dict[str, Any]] = {"type": "object"}

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        return dict(cls.schema)

    def check_args(self, args: dict[str, Any]) -> None:
        check_json_schema(self.name, self.schema, args)

    def checked_values(self, args: Any) -> dict[str, Any]:
        """The arguments as a plain dict, after the declared schema accepted them."""
        values = args.model_dump() if isinstance(args, FreeArgs) else dict(args)
        self.check_args(values)
        return values


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
        "host": host,
    })
    tool = cls()
    assert isinstance(tool, ProvidedTool)
    return tool
