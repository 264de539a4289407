"""What one case run produced: the verdict with its evidence (calls, answer, end state)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CallInfo", "RunResult"]

_MAX_TEXT = 2000


def clip(text: str | None, n: int = _MAX_TEXT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


class CallInfo(BaseModel):
    """A call as evidence: who made it, what it was, what it got."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="model, or probe (injected into the conversation).")
    name: str
    arguments: str
    code: str = Field(default="", description="Why it failed ('' when it did not).")
    stream: bool | None = None


class RunResult(BaseModel):
    """One run of one case (a variant, a repeat)."""

    model_config = ConfigDict(extra="forbid")

    case: str
    family: str
    title: str
    fault: str = ""
    variant: str = Field(default="", description="recovery: real or terse.")
    repeat: int = 0
    passed: bool = False
    skipped: str | None = Field(default=None, description="Why the run was not scored.")
    error: str | None = Field(default=None, description="The model server failed; the run is failed.")
    checks: dict[str, bool] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list, description="Why it passed or failed, in words.")
    calls: list[CallInfo] = Field(default_factory=list)
    answer: str | None = None
    # wire
    text_calls: list[str] = Field(default_factory=list, description="Markup seen in content, with the parser.")
    stream_equal: bool | None = None
    schema_valid: int = 0
    schema_total: int = 0
    # decide
    expected: str | None = None
    decision: str | None = None
    # recovery
    fixed_at_1: bool | None = None
    fixed_at_3: bool | None = None
    fits: bool | None = None
    repeated: bool | None = None
    longest_failed_repeat: int = 0
    denied_retry: bool = False
    outside_mutation: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    metrics: dict[str, Any] = Field(default_factory=dict)
