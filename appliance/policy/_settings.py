"""The ``policy`` section of ``ABHED_HOME/config.json``: mode, rules, capabilities."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from foundation import MODES, Mode
from tools.pathpattern import PathPattern, PatternError

__all__ = ["MODES", "Mode", "PolicySettings", "Rule"]

class Rule(BaseModel):
    """One operator rule; every field given must match (an empty rule matches every call).

    Rules see *normalized* arguments: paths after resolution beneath the
    workspace (symlinks expanded), bash as the simple commands it would run.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(default="*", description="Glob over tool names: bash, write, mcp__git__*.")
    path: str | None = Field(
        default=None,
        description="Path pattern (docs/tools.md, gitignore rules plus braces) over the resolved "
        "path argument, relative to the workspace root: *.pem is a name at any depth, src/** is "
        "anchored at the root; an absolute pattern matches absolute paths.")
    command: str | None = Field(
        default=None, description="bash only: glob over one parsed command, quotes undone "
        "(npm test*). * matches anything, slashes included.")
    program: str | None = Field(default=None, description="bash only: the command's program (git).")
    subcommand: str | None = Field(
        default=None, description="bash only: first non-option word after the program (status).")
    args: dict[str, str] = Field(
        default_factory=dict, description="Other arguments: field name -> glob over its value.")
    reason: str = Field(default="", description="Shown to the model and the approver.")

    @field_validator("path")
    @classmethod
    def _path_readable(cls, value: str | None) -> str | None:
        # A pattern the dialect cannot read would be a rule that silently matches nothing.
        if value is not None:
            try:
                PathPattern(value)
            except PatternError as exc:
                raise ValueError(exc.message) from None
        return value

    @model_validator(mode="after")
    def _bash_fields_need_bash(self) -> Rule:
        if (self.command or self.program or self.subcommand) and self.tool not in ("bash", "*"):
            raise ValueError("command/program/subcommand only match bash; set tool to \"bash\"")
        if self.subcommand and not self.program:
            raise ValueError("subcommand needs program (e.g. program \"git\", subcommand \"status\")")
        return self

    def describe(self) -> str:
        """The rule in one line, as shown before an "always allow" is stored."""
        bits = [f"tool={self.tool}"]
        for name in ("path", "command", "program", "subcommand"):
            value = getattr(self, name)
            if value is not None:
                bits.append(f"{name}={value}")
        bits.extend(f"args.{k}={v}" for k, v in sorted(self.args.items()))
        return " ".join(bits)


class PolicySettings(BaseModel):
    """Operator policy.  Precedence: extensions' vetoes, deny, ask, allow, mode default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = Field(default="ask", description="plan: read-only tools only; ask: mutations "
                       "ask unless an allow rule covers them; auto: everything runs unless a "
                       "rule, a destructive pattern or an extension says otherwise.")
    allow_looser_mode: bool = Field(
        default=False, description="Let a caller (abhed run --mode, rpc start's mode, abhed tool "
        "--mode, the TUI, a subagent) choose a mode looser than the configured one. Off: the "
        "configured mode is a ceiling; only stricter modes are accepted.")
    deny: list[Rule] = Field(default_factory=list)
    ask: list[Rule] = Field(default_factory=list)
    allow: list[Rule] = Field(default_factory=list)
    capabilities: list[str] | None = Field(
        default=None, description="Capabilities a session gets (fs:read, fs:write, shell, mcp, "
        "extension); null grants every one. Subagents get a subset of their parent's.")
