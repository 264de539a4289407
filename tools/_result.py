"""The one result shape every tool returns.

``content`` is what the model reads; ``details`` is structured data for the
UI and the audit log.  A failure is still a result (``ok=False``) whose
``content`` tells the model what failed, why and what to do next: nothing in
the tool path raises into the agent loop.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ErrorInfo", "ToolResult", "ToolFailure", "failure", "json_safe", "success"]


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced by U+FFFD.

    Surrogates reach results from model input echoed back (JSON allows
    ``"\\ud800"``) and from file names that are not UTF-8 (``os`` decodes them
    with surrogateescape).  JSON encoders and SQLite refuse them, so a result
    holding one could be neither printed nor recorded.
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if not value.isascii() else value
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class ErrorInfo(BaseModel):
    """A machine-readable error: a stable ``code`` and whether a retry can help."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    message: str
    retryable: bool = False

    @field_validator("message")
    @classmethod
    def _no_lone_surrogates(cls, value: str) -> str:
        return str(json_safe(value))


class ToolResult(BaseModel):
    """What a tool call produced; also exactly what ``abhed tool`` prints."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    content: str
    truncated: bool = False
    error: ErrorInfo | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content", "details")
    @classmethod
    def _no_lone_surrogates(cls, value: Any) -> Any:
        return json_safe(value)


NOT_STARTED = "Not run: the run was interrupted before this call started."
"""The answer to a call that an interrupt reached before it started (error ``not_run``)."""


class ToolFailure(Exception):
    """Raised inside a tool implementation to end the call with an error result.

    It is caught in exactly one place (the tool runner) and turned into a
    ``ToolResult`` with ``ok=False``; it never reaches the loop.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details or {}

    def to_result(self) -> ToolResult:
        return failure(self.code, self.message, retryable=self.retryable, details=self.details)


def failure(
    code: str,
    message: str,
    *,
    retryable: bool = False,
    details: dict[str, Any] | None = None,
) -> ToolResult:
    """An error result whose content is the instruction the model reads."""
    return ToolResult(
        ok=False,
        content=message,
        error=ErrorInfo(code=code, message=message, retryable=retryable),
        details=details or {},
    )


def success(content: str, *, truncated: bool = False, **details: Any) -> ToolResult:
    return ToolResult(ok=True, content=content, truncated=truncated, details=details)
