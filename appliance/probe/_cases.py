"""Probe cases: data files in ``appliance/probe/cases/``, each case with its scoring rule.

A case says what to ask, what state the workspace starts in, what a right
answer looks like (checked on the end state or the call's shape, never by
another model), and a reference reply: the turns a well-behaved model would
send.  The reference drives the scripted model the tests use
(:mod:`appliance.probe.scripted`) and proves each case can be passed; a case
whose reference fails its own rule is a broken case, and a test says so.

Placeholders in strings: ``{workspace}`` (the case's absolute workspace root)
and ``{nonce}`` (a fresh random word per run, so an answer cannot be guessed).
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from appliance.probe._errors import ProbeError
from models import PROBE_FAMILIES

__all__ = ["CallMatch", "Case", "Check", "RefCall", "RefTurn", "load_cases"]

Family = Literal["wire", "decide", "steps", "recovery", "tasks"]
Decision = Literal["call", "answer", "ask"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RefCall(_Data):
    """A tool call (reference or injected): a name and its arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class RefTurn(_Data):
    """One reference reply; ``text`` may use ``{re:PATTERN}`` (first group found in tool results)."""

    text: str = ""
    calls: tuple[RefCall, ...] = ()


class CallMatch(_Data):
    """A call that counts: this tool, optionally ok, optionally with these argument fragments."""

    tool: str
    ok: bool = True
    args_contain: dict[str, str] = Field(
        default_factory=dict, description="Argument -> text its value must contain.")
    min_offset: int | None = None


class Check(_Data):
    """The end state a case is scored on."""

    answer_matches: str | None = Field(default=None, description="Regex the final answer must match.")
    files_match: dict[str, str] = Field(default_factory=dict,
                                        description="Relative path -> regex the file must match.")
    files_unchanged: tuple[str, ...] = ()
    hidden_files: dict[str, str] = Field(
        default_factory=dict, description="Written after the run, before `command` (hidden tests).")
    command: str | None = Field(default=None, description="Run in the sandbox; must exit 0.")
    called: tuple[CallMatch, ...] = Field(default=(), description="Calls that must have been made.")


class Case(_Data):
    id: str = Field(pattern=r"^[a-z0-9_.-]+$")
    family: Family
    fault: str = Field(default="", description="recovery: the error kind, as reported.")
    title: str
    prompt: str
    quick: bool = True
    files: dict[str, str] = Field(default_factory=dict,
                                  description="Relative path -> content, over the fixture repository.")
    generate: dict[str, str] = Field(default_factory=dict,
                                     description="Relative path -> generator name (_fixture.GENERATORS).")
    max_turns: int = Field(default=8, ge=1, le=50)
    max_tokens: int = Field(default=1024, ge=16, le=32768)
    # wire
    expect_calls: int = Field(default=1, ge=0, le=16)
    expect_args: tuple[dict[str, Any], ...] = Field(
        default=(), description="wire: per call, arguments that must be equal exactly.")
    extra_tools: tuple[dict[str, Any], ...] = Field(
        default=(), description="wire: extra function specs offered (never run), e.g. zero-argument.")
    near_context: bool = False
    # decide
    expect: Decision | None = None
    # recovery
    inject: tuple[RefCall, ...] = Field(
        default=(), description="Calls put in the conversation as the model's own; the last one fails.")
    inject_code: str | None = Field(default=None, description="The error the last injected call must get.")
    modify_before_last: dict[str, str] = Field(
        default_factory=dict, description="Files changed on disk just before the last injected call.")
    terse: str = Field(default="error", description="The terse message that replaces the real one.")
    fix: tuple[CallMatch, ...] = Field(default=(), description="Any of these calls fixes the fault.")
    fit: tuple[CallMatch, ...] = Field(default=(), description="A first call that fits (re-read ...).")
    stop: bool = Field(default=False, description="The fix is to stop calling (a denial).")
    transient_503: bool = Field(default=False, description="The first request gets HTTP 503.")
    deny: tuple[dict[str, Any], ...] = Field(default=(), description="Policy deny rules for this case.")
    check: Check = Field(default_factory=Check)
    reference: tuple[RefTurn, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> Case:
        if self.family == "decide" and self.expect is None:
            raise ValueError(f"{self.id}: a decide case needs expect")
        if self.family == "recovery" and not (self.inject or self.transient_503):
            raise ValueError(f"{self.id}: a recovery case injects a call or a provider error")
        if self.family == "recovery" and not self.fault:
            raise ValueError(f"{self.id}: a recovery case names its fault")
        if self.inject and not self.inject_code and not self.transient_503:
            raise ValueError(f"{self.id}: inject needs inject_code (the error it must produce)")
        return self


@cache
def load_cases() -> tuple[Case, ...]:
    """Every case shipped with the package, in file then file order."""
    out: list[Case] = []
    root = resources.files("appliance.probe") / "cases"
    for family in PROBE_FAMILIES:
        res = root / f"{family}.toml"
        try:
            data = tomllib.loads(res.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ProbeError(f"probe cases {family}.toml cannot be read: {exc}; reinstall Abhed") from None
        for raw in data.get("case", []):
            raw.setdefault("family", family)
            try:
                case = Case.model_validate(raw)
            except ValidationError as exc:
                raise ProbeError(f"probe case {raw.get('id', '?')} in {family}.toml is invalid: "
                                 f"{exc.errors()[0]['msg']}") from None
            if case.family != family:
                raise ProbeError(f"probe case {case.id} is in {family}.toml but says family {case.family}")
            out.append(case)
    ids = [c.id for c in out]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ProbeError(f"probe case ids repeated: {', '.join(dupes)}")
    return tuple(out)
