"""The five-part tool contract: name, description, input schema, run, result.

A tool is a small object; the runner (:func:`run_tool`) is the only place that
validates arguments and turns a :class:`ToolFailure` or an unexpected
exception into an error result, so every tool gets identical treatment.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from tools._paths import Workspace
from tools._result import ToolFailure, ToolResult, failure
from tools._sandbox import ShellSandbox
from tools._settings import ToolSettings

if TYPE_CHECKING:  # tools.task imports this module: the Protocol is named for the checker
    from tools.task import Subagents

__all__ = [
    "ARTIFACT_PREFIX",
    "ArtifactKeeper",
    "Args",
    "FileLedger",
    "FoundArtifact",
    "MemoryLedger",
    "Tool",
    "ToolContext",
    "run_tool",
    "validate_args",
]


class Args(BaseModel):
    """Base of every tool's input schema: unknown fields and coercion refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class FileLedger(Protocol):
    """What this session knows about files: the hash each was last seen at.

    A file is *seen* when this session read it or wrote it.  ``write`` and
    ``edit`` require the file's current hash to equal the seen hash, so the
    model never overwrites content it has not seen.
    """

    def seen_hash(self, path: str) -> str | None: ...


class MemoryLedger:
    """A ledger held in memory, for tests and one-off calls; remembers todo and plan too."""

    def __init__(self) -> None:
        self.hashes: dict[str, str] = {}
        self.memory: dict[str, Any] = {}

    def seen_hash(self, path: str) -> str | None:
        return self.hashes.get(path)

    def recalled(self, kind: str) -> Any:
        """The todo list or plan the last accepted call left (``tools.todo.WorkingMemory``)."""
        return self.memory.get(kind)

    def observe(self, result: ToolResult) -> None:
        note_file_state(self.hashes, result)
        for kind in ("todo", "plan"):
            if result.ok and kind in result.details:
                self.memory[kind] = result.details[kind]


def note_file_state(hashes: dict[str, str], result: ToolResult) -> None:
    """Fold one result into a path -> hash map (the file state a result reports)."""
    state = result.details.get("file_state")
    if result.ok and isinstance(state, dict):
        path, digest = state.get("path"), state.get("sha256")
        if isinstance(path, str) and isinstance(digest, str):
            hashes[path] = digest


#: How a tool names a blob the session kept (a cut output, a preimage) to the model.
ARTIFACT_PREFIX = "abhed:artifact/"


class FoundArtifact(NamedTuple):
    """A blob of this session: its local file, the file it was taken from, what it is.

    ``kind``: ``output`` (a command's output), ``preimage`` (a file before a
    change), ``shown`` (a tool result as the model was shown it, kept when it
    was masked: a ``read`` result already carries its line numbers).
    """

    path: str
    source: str
    kind: str


class ArtifactKeeper(Protocol):
    """Where a session keeps blobs whole, beside its event log (``appliance`` provides it).

    ``keep`` returns ``{"ref", "sha256", "bytes", "kind", "source"}`` or ``None``
    when the blob could not be kept (over the session's disk budget); it
    never raises for that.  ``find`` maps a ref to a blob of *this* session,
    or ``None``.
    """

    def keep(self, data: bytes | None = None, *, path: str | None = None, kind: str,
             source: str = "") -> dict[str, Any] | None: ...

    def find(self, ref: str) -> FoundArtifact | None: ...


@dataclass
class ToolContext:
    """Everything a tool may touch for one call."""

    workspace: Workspace
    settings: ToolSettings = field(default_factory=ToolSettings)
    ledger: FileLedger = field(default_factory=MemoryLedger)
    sandbox: ShellSandbox | None = None  # where bash runs; None: bash refuses
    sandbox_problem: str | None = None  # why there is no sandbox, told to the model
    artifacts: ArtifactKeeper | None = None  # None: cut outputs and preimages are not kept
    subagents: Subagents | None = None  # who runs task calls; None: task refuses
    call_id: str = ""  # the call being run (set per call by the dispatcher)
    #: Someone watches this call run (the TUI's card): a long-running tool tells it the
    #: output it has so far (text, as it comes, from any thread).  None: nobody watches.
    progress: Callable[[str], None] | None = None
    #: Whether the run this call belongs to was interrupted (set per call by the
    #: dispatcher; None: nobody can interrupt).  ``bash`` hands it to the sandbox, which
    #: asks it once the command is registered, so an interrupt that came before finds
    #: the command refused and one that comes after finds it to stop.
    cancelled: Callable[[], bool] | None = None


class Tool:
    """Base class: subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[Args]]
    capabilities: ClassVar[frozenset[str]] = frozenset()
    mutates: ClassVar[bool] = False
    source: ClassVar[str] = "native"
    """Who offers the tool: ``native``, ``extension:NAME``, ``mcp:SERVER``.  Named when two
    sources offer one tool name, and in the ``<untrusted>`` tag around the tool's output."""

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError

    def precheck(self, args: Any, ctx: ToolContext) -> ToolResult | None:
        """The error result this call is certain to end with, found with no side effects.

        ``args`` are the arguments the policy gate validated (an instance of
        :attr:`args_model`; raw JSON is validated here first).  Policy calls
        this before it asks a human, so only calls that could succeed reach
        an approval: a hopeless one (bad schema; for the file tools also a
        relative path, outside the workspace, not read, stale, no match, not
        unique) fails at once with exactly the error :func:`run_tool` would
        give.  ``None`` means nothing was found; the real call still checks
        everything again, since the world may change before it runs.
        Subclasses add their own checks in :meth:`check`, sharing the code
        their :meth:`run` uses.
        """
        try:
            self.check(args if isinstance(args, self.args_model) else validate_args(self, args), ctx)
        except ToolFailure as exc:
            return exc.to_result()
        except Exception:
            return None
        return None

    def preview(self, args: Any, ctx: ToolContext) -> str | None:
        """What the call would change, as a unified diff against what is on disk, computed
        with no side effects before a person is asked (``args`` validated and normalized).

        ``None``: the tool changes no file, or what it would change cannot be known
        beforehand.  Raising is allowed (the call is hopeless): the asker shows no preview.
        """
        return None

    def preview_of(self, raw: Any, ctx: ToolContext) -> str | None:
        """:meth:`preview` of the gate's validated arguments (raw JSON is validated first);
        ``None`` when they are invalid or the preview fails (the call itself will report why)."""
        try:
            return self.preview(raw if isinstance(raw, self.args_model) else validate_args(self, raw), ctx)
        except Exception:
            return None

    @classmethod
    def check_args(cls, values: dict[str, Any]) -> None:
        """Raise a :class:`ToolFailure` for validated values ``args_model`` cannot judge.

        Part of :func:`validate_args` (a tool defined by a JSON schema checks
        that schema here); the default finds nothing.
        """

    def check(self, args: Any, ctx: ToolContext) -> None:
        """Raise the :class:`ToolFailure` that :meth:`run` would raise before changing anything.

        Called with validated arguments by :meth:`precheck`; the default finds nothing.
        """

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        schema = cls.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    @classmethod
    def spec(cls) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": cls.name,
                "description": cls.description,
                "parameters": cls.input_schema(),
            },
        }


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a boolean (true or false)",
    "missing": None,
    "extra_forbidden": None,
}


# Python type -> JSON Schema type name, bool before int (a bool is an int in Python).
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
    (str, "string"), (list, "array"), (dict, "object"))


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)),
                type(value).__name__)


def _shown(value: Any) -> str:
    if isinstance(value, (list, dict)) and len(value) > 20:
        return f"({_json_type(value)} of {len(value)} items)"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        return f"({_json_type(value)} nested too deeply to show)"
    return text if len(text) <= 80 else text[:77] + "..."


def validate_args(tool: type[Tool] | Tool, raw: Any) -> Args:
    """Validate raw JSON-like arguments, or raise a ToolFailure naming every problem.

    The one validation of a call: the policy gate calls it once and hands the
    result on; :meth:`Tool.precheck` and :func:`run_tool` take an instance of
    the tool's ``args_model`` as already validated.
    """
    model = tool.args_model
    if not isinstance(raw, Mapping):
        raise ToolFailure(
            "invalid_arguments",
            f"Arguments for {tool.name} must be a JSON object; got {_json_type(raw)} {_shown(raw)}.",
        )
    try:
        args = model.model_validate(dict(raw))
    except ValidationError as exc:
        allowed = ", ".join(model.model_fields)
        problems: list[str] = []
        fields: list[dict[str, Any]] = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            kind = err["type"]
            if kind == "missing":
                msg = f"`{loc}` is required but missing"
            elif kind == "extra_forbidden":
                msg = f"`{loc}` is not a parameter of {tool.name} (it takes: {allowed})"
            elif kind in _TYPE_WORDS:
                got = err.get("input")
                msg = f"`{loc}` must be {_TYPE_WORDS[kind]}; got {_json_type(got)} {_shown(got)}"
            else:
                got = err.get("input")
                msg = f"`{loc}`: {err['msg']}; got {_json_type(got)} {_shown(got)}"
            problems.append(msg)
            fields.append({"field": loc, "problem": kind})
        text = f"Invalid arguments for {tool.name}: " + "; ".join(problems) + ". Nothing was run; fix and call again."
        raise ToolFailure("invalid_arguments", text, details={"fields": fields}) from None
    tool.check_args(args.model_dump())
    return args


def run_tool(tool: Tool, raw_args: Any, ctx: ToolContext) -> ToolResult:
    """Validate and run one call; never raises for anything the model can cause.

    ``raw_args`` already an instance of the tool's ``args_model`` were
    validated by the caller (the policy gate, which also resolved their paths)
    and are run as they are.
    """
    try:
        args = raw_args if isinstance(raw_args, tool.args_model) else validate_args(tool, raw_args)
        return tool.run(args, ctx)
    except ToolFailure as exc:
        return exc.to_result()
    except MemoryError:
        return failure("too_large", f"{tool.name} ran out of memory on this input; narrow the request.")
    except Exception as exc:
        return failure(
            "internal_error",
            f"{tool.name} failed unexpectedly ({type(exc).__name__}: {exc}). This is a bug in Abhed, "
            "not in your call; try a different approach or tell the user.",
            details={"exception": type(exc).__name__},
        )
