"""``ABHED_HOME/config.json``: the operator's settings, validated strictly.

Unknown keys are refused rather than ignored: a misspelt deny rule that is
silently dropped is worse than an agent that will not start.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from appliance._errors import ConfigError
from appliance._home import abhed_home
from appliance.events import EventLogSettings
from appliance.extensions import ExtensionSpec
from appliance.loop import Limits, TaskSettings
from appliance.mcp import McpServerSpec
from appliance.policy import PolicySettings
from appliance.sandbox import SandboxSettings
from foundation import FileMissing, FoundationError, load_document
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


MAX_CONFIG_BYTES = 1 << 20  # a config is a few KiB; far more is not one


def load_config(path: Path | None = None) -> Config:
    """Load config from ``path`` (or ``ABHED_HOME/config.json``; absent means defaults).

    Read strictly (``foundation.load_document``): every invalid key is named with
    its location, not only the first.
    """
    explicit = path is not None
    target = path or abhed_home() / "config.json"
    try:
        config = load_document(target, Config, what="config", cap=MAX_CONFIG_BYTES,
                               syntax="json",
                               hint="Fix the file (docs/configuration.md lists every key), or move it "
                                    "aside to start from the built-in defaults.")
    except FileMissing:
        if explicit:
            raise ConfigError(f"config file {target} does not exist") from None
        return Config()
    except FoundationError as exc:
        raise ConfigError(str(exc)) from None
    config._source = str(target)
    return config
