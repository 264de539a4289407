"""A tool someone else defined (an extension's, an MCP server's), checked against its JSON schema.

Both extension-provided tools and MCP tools take any JSON object, check it
against the JSON schema their provider declared (which is also what the model
is shown), and cap the text they return.  That shared part lives here, in
``tools``, so neither ``appliance.extensions`` nor ``appliance.mcp`` reaches
into the other.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict

from tools._result import ToolFailure
from tools._tool import Args, Tool

__all__ = ["MAX_CONTENT_CHARS", "FreeArgs", "SchemaTool", "cap_text", "check_json_schema"]

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
    """A tool someone else defined: any JSON object in, checked against the JSON schema it
    declared, which is also what the model is shown.

    ``source`` says where the tool comes from (``extension:NAME``,
    ``mcp:SERVER``); it names both sides when two sources offer one name, and
    the loop puts it in the ``<untrusted>`` tag around the output.
    """

    args_model = FreeArgs
    schema: ClassVar[dict[str, Any]] = {"type": "object"}

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        return dict(cls.schema)

    @classmethod
    def check_args(cls, values: dict[str, Any]) -> None:
        check_json_schema(cls.name, cls.schema, values)

    def checked_values(self, args: Any) -> dict[str, Any]:
        """The arguments as a plain dict, after the declared schema accepted them.

        ``FreeArgs`` come from :func:`validate_args`, which checked the schema
        already; anything else is checked here.
        """
        if isinstance(args, FreeArgs):
            return args.model_dump()
        values = dict(args)
        self.check_args(values)
        return values
