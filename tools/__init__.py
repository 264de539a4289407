"""Abhed's native tools and the contract they share.

Public surface: the result shape (:class:`ToolResult`, :class:`ErrorInfo`),
the tool base and context (:class:`Tool`, :class:`ToolContext`,
:class:`ToolSettings`, :class:`Workspace`, :class:`FileLedger`), argument
validation (:class:`Args`, :func:`validate_args`), result helpers
(:func:`failure`, :func:`json_safe`), the base for tools defined by a JSON
schema (:class:`SchemaTool`, with :func:`cap_text` and
:func:`check_json_schema`; extensions and MCP share it), the runner
(:func:`run_tool`) and the registry of native tools (:func:`native_tools`).

Errors: tools never raise into the caller for anything the model can cause;
failures come back as ``ToolResult(ok=False, error=ErrorInfo(code=...))``.
Inside a tool, :class:`ToolFailure` (the package's one error root) ends the
call and is turned into that result by :func:`run_tool`.
"""

from __future__ import annotations

from tools._paths import Workspace
from tools._result import NOT_STARTED, ErrorInfo, ToolFailure, ToolResult, failure, json_safe
from tools._sandbox import JobOutput, ShellRun, ShellSandbox
from tools._schema_tool import SchemaTool, cap_text, check_json_schema
from tools._settings import ToolSettings
from tools._tool import (
    ARTIFACT_PREFIX,
    Args,
    ArtifactKeeper,
    FileLedger,
    FoundArtifact,
    MemoryLedger,
    Tool,
    ToolContext,
    note_file_state,
    run_tool,
    validate_args,
)

__all__ = [
    "NOT_STARTED",
    "ARTIFACT_PREFIX",
    "Args",
    "ArtifactKeeper",
    "ErrorInfo",
    "FileLedger",
    "FoundArtifact",
    "JobOutput",
    "MemoryLedger",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolResult",
    "SchemaTool",
    "ShellRun",
    "ShellSandbox",
    "ToolSettings",
    "Workspace",
    "cap_text",
    "check_json_schema",
    "failure",
    "json_safe",
    "native_tools",
    "note_file_state",
    "run_tool",
    "validate_args",
]


def native_tools() -> dict[str, Tool]:
    """A fresh instance of every native tool built so far, by name."""
    from tools.bash import Bash
    from tools.edit import Edit
    from tools.glob import Glob
    from tools.grep import Grep
    from tools.plan import Plan
    from tools.read import Read
    from tools.task import Task
    from tools.todo import Todo
    from tools.write import Write

    tools: list[Tool] = [Read(), Write(), Edit(), Glob(), Grep(), Bash(), Todo(), Plan(), Task()]
    return {t.name: t for t in tools}
