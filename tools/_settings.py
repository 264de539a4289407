"""Operator settings the native tools honour.

These come from ``ABHED_HOME/config.json`` (section ``tools``) and are passed
to every call in the ``ToolContext``; tools never read config themselves, so a
subagent can be given a stricter copy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tools.pathpattern import check_patterns

__all__ = ["DEFAULT_EXCLUDES", "DEFAULT_SECRET_PATHS", "ToolSettings"]

# Directory names never walked by glob/grep, whatever .gitignore says.
DEFAULT_EXCLUDES: tuple[str, ...] = ("node_modules", ".git", "target", "dist", "__pycache__")

# Path patterns (tools.pathpattern, gitignore's rules) refused for reading.  A
# pattern with no slash matches a name at any depth; a trailing slash matches a
# directory anywhere; a pattern with an inner slash is anchored at the workspace
# root, hence ``**/`` in front of those; ``!`` re-allows.
DEFAULT_SECRET_PATHS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "!.env.example",
    "!.env.sample",
    "!.env.template",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh/",
    ".gnupg/",
    "**/.aws/credentials",
    "**/.aws/config",
    "**/.docker/config.json",
    "**/.kube/config",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
)


class ToolSettings(BaseModel):
    """Limits and switches for the native tools; every field has a safe default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret_paths: tuple[str, ...] = Field(
        default=DEFAULT_SECRET_PATHS,
        description="Path patterns (docs/tools.md) of files the tools refuse to read or search.",
    )
    ignore: tuple[str, ...] = Field(
        default=(),
        description="Extra path patterns (relative to the workspace) glob and grep skip.",
    )
    default_excludes: tuple[str, ...] = Field(
        default=DEFAULT_EXCLUDES,
        description="Directory names never walked.",
    )
    create_parent_dirs: bool = Field(
        default=False,
        description="Let write create missing parent directories (off: surprise folders are a common agent mistake).",
    )
    new_file_mode: int = Field(default=0o644, ge=0, le=0o7777, description="Mode of files write creates.")
    read_default_limit_lines: int = Field(default=2000, ge=1)
    read_max_line_chars: int = Field(default=2000, ge=80)
    read_max_output_chars: int = Field(
        default=100_000, ge=4000,
        description="Most characters one read returns (about 25,000 tokens); the rest is paged "
        "with offset.",
    )
    glob_max_results: int = Field(default=1000, ge=1)
    edit_max_file_bytes: int = Field(
        default=512 * 1024 * 1024,
        ge=1,
        description="Largest file edit/write will rewrite; edits stream, so this bounds disk churn, not memory.",
    )
    fuzzy_max_file_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=0,
        description="Largest file searched for a nearest partial match when an edit finds nothing.",
    )
    grep_engine: Literal["auto", "ripgrep", "python"] = Field(
        default="auto",
        description="grep's engine: auto (ripgrep when an rg binary is found, else pure Python), "
        "or force one.",
    )

    @field_validator("secret_paths", "ignore")
    @classmethod
    def _patterns_readable(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        # An unreadable pattern would be silently inert: a secret left readable.
        check_patterns(value, info.field_name or "patterns")
        return value
