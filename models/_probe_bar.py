"""The capability probe's pass bar, as a catalog entry declares it.

It lives with the model's catalog entry so it ships in the bundle beside the
weights: a site can tighten it, and a test model declares the bar it can
honestly meet (say, the wire family under named tool choice) instead of a
global bar being lowered until anything passes.  ``abhed probe`` reads it;
the families and scoring are in ``appliance.probe``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["PROBE_FAMILIES", "ProbeBar"]

PROBE_FAMILIES: tuple[str, ...] = ("wire", "decide", "steps", "recovery", "tasks")

_DEFAULT_MIN_RATE = {"wire": 0.95, "decide": 0.6, "steps": 0.75, "recovery": 0.5, "tasks": 0.3}


class ProbeBar(BaseModel):
    """What ``abhed probe`` runs for this model and what it must reach to pass.

    The hard gates (no tool call left as text, streaming equals non-streaming,
    at least 99% schema-valid calls, never one failed call three times in a
    row, no mutation outside the workspace, no retry of a denied call) always
    apply; they are not part of the bar and cannot be lowered.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: tuple[str, ...] = Field(default=PROBE_FAMILIES,
                                      description="Families a full probe runs.")
    quick_families: tuple[str, ...] = Field(default=("wire", "recovery"),
                                            description="Families `abhed probe --quick` runs.")
    quick_cases: tuple[str, ...] = Field(
        default=(), max_length=64,
        description="Case ids (`family.name`, each of a quick family) that `abhed probe --quick` "
        "runs, when set; default: every quick case of quick_families.  The health gate runs "
        "`--quick`, so this names what a model is held to before it goes live: a site that "
        "wants the gate short on a CPU host names the cases it cares about, and the report and "
        "the probe's session record which ran.")
    min_rate: dict[str, float] = Field(
        default_factory=lambda: dict(_DEFAULT_MIN_RATE),
        description="Family -> lowest case pass rate (0-1) that passes; a family left out has no "
        "rate bar (its hard gates still apply).")
    tool_choice: Literal["auto", "named"] = Field(
        default="auto", description="auto: the model picks the tool, as in the agent loop. named: "
        "the wire family names the tool (for test models that cannot choose one); the report says "
        "so, since it then shows nothing about choosing tools.")
    repeats: int = Field(default=3, ge=1, le=10,
                         description="Runs of each task; a task passes only if every run passes.")
    note: str = Field(default="", max_length=2000,
                      description="Why this bar, shown in every report (e.g. 'random-weight test model').")

    @field_validator("families", "quick_families")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [f for f in v if f not in PROBE_FAMILIES]
        if unknown:
            raise ValueError(f"unknown probe families {', '.join(unknown)}; use: {', '.join(PROBE_FAMILIES)}")
        if not v:
            raise ValueError("a probe bar needs at least one family; name some of: "
                             f"{', '.join(PROBE_FAMILIES)}")
        return v

    @field_validator("quick_cases")
    @classmethod
    def _case_ids(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for case in v:
            family, _, name = case.partition(".")
            if family not in PROBE_FAMILIES or not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name):
                raise ValueError(f"quick_cases: {case!r} is not a case id (family.name, the family "
                                 f"one of {', '.join(PROBE_FAMILIES)})")
        if len(set(v)) != len(v):
            raise ValueError("quick_cases names a case twice")
        return v

    @model_validator(mode="after")
    def _cases_in_quick_families(self) -> ProbeBar:
        outside = [c for c in self.quick_cases if c.partition(".")[0] not in self.quick_families]
        if outside:
            raise ValueError(f"quick_cases {', '.join(outside)} are not in quick_families "
                             f"({', '.join(self.quick_families)})")
        return self

    @field_validator("min_rate")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for family, rate in v.items():
            if family not in PROBE_FAMILIES:
                raise ValueError(f"min_rate: unknown family {family!r}")
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"min_rate[{family}] = {rate} is not between 0 and 1")
        return v
