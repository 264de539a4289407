"""``ABHED_HOME/config.json``: the operator's settings, validated strictly.

Unknown keys are refused rather than ignored: a misspelt deny rule that is
silently dropped is worse than an agent that will not start.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from appliance._errors import ConfigError
from appliance._home import abhed_home
from appliance.events import EventLogSettings
from appliance.extensions import ExtensionSpec
from appliance.loop import Limits, TaskSettings
from appliance.mcp import McpServerSpec
from appliance.policy import PolicySettings
from appliance.sandbox import SandboxSettings
from models import ProviderConfig, ServeSettings
from tools import ToolSettings

__all__ = ["Config", "load_config"]


class Config(BaseModel):
    """The whole operator configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: ToolSettings = Field(default_factory=ToolSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    extensions: list[ExtensionSpec] = Field(default_factory=list)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    events: EventLogSettings = Field(default_factory=EventLogSettings)
    _source: str | None = PrivateAttr(default=None)

    @property
    def source(self) -> str:
        """The file this config came from, as refusals name it (built-in defaults: none)."""
        return self._source or f"{abhed_home() / 'config.json'} (not present: built-in defaults)"

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        for section, names in (("extensions", [e.name for e in self.extensions]),
                               ("mcp_servers", [m.name for m in self.mcp_servers])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{section}: names must be unique; repeated: {', '.join(dupes)}")
        return self

    # -- models and the loop (docs/providers.md) --
    custom_providers: tuple[ProviderConfig, ...] = Field(
        default=(), description="Model endpoints, in the specification's shape.")
    default_provider: str | None = Field(
        default=None, description="Provider used when none is named; default: the first.")
    catalog: str | None = Field(
        default=None, description="Model catalog file; default: ABHED_HOME/catalog.json.")
    serve: ServeSettings = Field(default_factory=ServeSettings)
    loop: Limits = Field(default_factory=Limits)
    tasks: TaskSettings = Field(default_factory=TaskSettings)

    @model_validator(mode="after")
    def _providers_unique(self) -> Config:
        names = [p.name for p in self.custom_providers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"custom_providers names must be unique; repeated: {', '.join(dupes)}")
        if self.default_provider is not None and self.default_provider not in names:
            raise ValueError(f"default_provider {self.default_provider!r} is not in custom_providers "
                             f"({', '.join(names) or 'none configured'})")
        return self


def load_config(path: Path | None = None) -> Config:
    """Load config from ``path`` (or ``ABHED_HOME/config.json``; absent means defaults)."""
    explicit = path is not None
    target = path or abhed_home() / "config.json"
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file {target} does not exist") from None
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config {target}: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{target} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{target} is not a valid Abhed config: {problems}") from None
    config._source = str(target)
    return config
