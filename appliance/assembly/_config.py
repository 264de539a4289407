"""The settings' schema (``config.json``, and the site spec's ``[agent]`` table), read strictly.

Unknown keys are refused rather than ignored: a misspelt deny rule that is
silently dropped is worse than an agent that will not start.  The same model
is the site layer's and the user layer's; how they meet is
:mod:`appliance.assembly._layers`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from appliance._errors import ConfigError
from appliance._home import abhed_home
from appliance.assembly._run_settings import Limits, TaskSettings
from appliance.events import EventLogSettings
from appliance.extensions import ExtensionSpec
from appliance.mcp import McpServerSpec
from appliance.policy import PolicySettings
from appliance.sandbox import SandboxSettings
from foundation import FileMissing, load_document, reraised_as
from models import ProviderConfig, ServeSettings
from tools import ToolSettings

__all__ = ["Config", "SiteSwitches", "read_config"]


class SiteSwitches(BaseModel):
    """What the site lets an engineer's own config add (config section ``site``).

    Only the site layer may set these (docs/configuration.md, "What an engineer
    may change"); on a development checkout they mean nothing.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_user_allow_rules: bool = Field(
        default=False, description="Let an engineer add policy.allow rules (they widen what runs "
        "without asking). Off: only the site's allow rules apply.")
    allow_user_extensions: bool = Field(
        default=False, description="Let an engineer add extensions of their own, veto-only (no "
        "list_tools/invoke_tool). The site's extensions always stay.")
    allow_user_mcp_servers: bool = Field(
        default=False, description="Let an engineer add MCP servers of their own (they add tools). "
        "Off: only the site's reviewed servers, by name and pin.")
    allow_user_providers: bool = Field(
        default=False, description="Let an engineer add model providers of their own. Off: only "
        "the site's model service.")


#: What :attr:`Config.source` adds to the user's file when it does not exist.
ABSENT = " (not present: built-in defaults)"


class Config(BaseModel):
    """The whole configuration: the site's settings, an engineer's, or the two layered."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: ToolSettings = Field(default_factory=ToolSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    extensions: list[ExtensionSpec] = Field(default_factory=list)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    events: EventLogSettings = Field(default_factory=EventLogSettings)
    site: SiteSwitches = Field(default_factory=SiteSwitches)
    _source: str | None = PrivateAttr(default=None)
    _layered: Any = PrivateAttr(default=None)  # appliance.assembly._layers.Layered, when layered

    @property
    def source(self) -> str:
        """The file this config came from, as refusals name it (built-in defaults: none)."""
        return self._source or f"{abhed_home() / 'config.json'}{ABSENT}"

    @property
    def user_file(self) -> Path | None:
        """The engineer's settings file this config was read from (None: built-in defaults)."""
        path = Path(self._source) if self._source else None
        return path if path is not None and path.is_file() else None

    def source_of(self, setting: str) -> str:
        """The file (or flag) the effective value of ``setting`` came from, for a refusal."""
        if self._layered is not None:
            origin = self._layered.origin(setting)
            if origin.kind != "default":
                return str(origin.where)
        return self.source

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


def read_config(path: Path | None = None) -> Config:
    """One file's settings: ``path`` (or ``ABHED_HOME/config.json``; absent means defaults).

    The user layer alone; a door wants :func:`appliance.compose.load_config`,
    which narrows the site's settings by it.  Read strictly (``foundation.load_document``): every invalid key is named with
    its location, not only the first.
    """
    explicit = path is not None
    target = path or abhed_home() / "config.json"
    with reraised_as(ConfigError):
        try:
            config = load_document(target, Config, what="config", cap=MAX_CONFIG_BYTES,
                                   syntax="json",
                                   hint="Fix the file (docs/configuration.md lists every key), "
                                        "or move it aside to start from the built-in defaults.")
        except FileMissing:
            if explicit:
                raise ConfigError(f"config file {target} does not exist") from None
            return Config()
    config._source = str(target)
    return config
