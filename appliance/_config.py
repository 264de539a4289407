"""``ABHED_HOME/config.json``: the operator's settings, validated strictly.

Unknown keys are refused rather than ignored: a misspelt deny rule that is
silently dropped is worse than an agent that will not start.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from appliance._errors import ConfigError
from appliance._home import abhed_home
from tools import ToolSettings

__all__ = ["Config", "load_config"]


class Config(BaseModel):
    """The whole operator configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: ToolSettings = Field(default_factory=ToolSettings)


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
        return Config.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{target} is not a valid Abhed config: {problems}") from None
