"""The ``loop`` and ``tasks`` sections of the settings: bounds on a run and on its subagents.

They are sections of :class:`~appliance.assembly.Config`, so they live beside it
rather than in :mod:`appliance.loop`, which enforces them: a settings file is read
by every door, and ``abhed tool`` (one call, no agent) must not import the agent
loop to validate it (docs/performance.md).  :mod:`appliance.loop` re-exports both.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Limits", "TaskSettings"]


class Limits(BaseModel):
    """Bounds on one run (config section ``loop``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int = Field(default=50, ge=1, le=10_000, description="Model replies per run.")
    max_tokens: int = Field(default=2_000_000, ge=1,
                            description="Prompt + completion tokens summed over the run's turns.")
    deadline_s: float = Field(default=3600.0, gt=0, le=7 * 86400, description="Wall-clock time per run.")
    max_completion_tokens: int | None = Field(
        default=None, ge=1, description="max_tokens sent with each request; default: the server's.")
    context_tokens: int | None = Field(
        default=None, ge=256,
        description="The model's context length in tokens; default: the catalog entry's "
        "max_model_len. Unknown: no automatic compaction.")
    compact_at: float = Field(
        default=0.6, gt=0.05, le=0.95,
        description="Compact when a request would pass this share of the context (small local "
        "models degrade well before it is full).")
    max_repeated_failures: int = Field(
        default=3, ge=0, le=1000,
        description="End the run (reason repeated_failure) after this many identical failed or "
        "denied calls in a row, so a denial cannot become an endless retry; 0: never.")


class TaskSettings(BaseModel):
    """Subagents spawned by the ``task`` tool (config section ``tasks``); see docs/tools.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: int = Field(default=20, ge=1, le=1000, description="Subagents running at once.")
    default_max_turns: int = Field(default=20, ge=1, le=1000,
                                   description="Turns a child reserves when its call names none.")
    max_tokens: int = Field(default=400_000, ge=1, description="Most tokens one child reserves.")
    max_seconds: float = Field(default=1800.0, gt=0, le=86400,
                               description="Most wall-clock time one child reserves.")
