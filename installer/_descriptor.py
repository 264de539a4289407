"""The release's model-server declaration: how to start it and how to know it works.

The signed manifest says *what* a bundle holds; how its model is served is
declared by the bundle's model itself, in ``models/<name>/abhed-serve.json``
(one model per bundle carries it), so its bytes are covered by the manifest's
digest like any weight file.  The installer never imports the release's code:
it runs the commands declared here, from inside the release, and checks the
answers over HTTP.  The same gate code runs real vLLM on a GPU host and the
package's scripted OpenAI-compatible server in CI; only this file differs.

The agent probe is the release's own ``abhed run`` pointed at the gate's model
server: ``agent_config`` is the agent's ``config.json`` (placeholders filled in
its string values), which the gate writes into the probe's fresh ``ABHED_HOME``
(``{data}``) before running the probe.

Commands are argv lists with placeholders: ``{release}`` ``{venv}``
``{python}`` ``{model_dir}`` ``{host}`` ``{port}`` ``{base_url}``
``{served_name}`` ``{workspace}`` ``{data}``.  After expansion, a command's
program must lie inside the release directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from foundation import is_within, load_document, reraised_as

from ._errors import StepFailed

__all__ = ["DESCRIPTOR_NAME", "KnownAnswer", "ServeDescriptor", "expand", "expand_values",
           "find_descriptor", "load_descriptor"]

DESCRIPTOR_NAME = "abhed-serve.json"
_MAX_BYTES = 256 * 1024
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
PLACEHOLDERS = ("release", "venv", "python", "model_dir", "host", "port", "base_url", "probe_file",
                "served_name", "workspace", "data")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class KnownAnswer(_Model):
    """A prompt whose answer must contain ``expect`` (case-insensitive), at temperature 0."""

    prompt: str = Field(min_length=1, max_length=4000)
    expect: str = Field(min_length=1, max_length=200)
    max_tokens: int = Field(default=32, ge=1, le=4096)


class ServeDescriptor(_Model):
    format: Literal["abhed-serve/1"]
    served_name: str = Field(min_length=1, max_length=128)
    command: tuple[str, ...] = Field(min_length=1, max_length=256)
    env: dict[str, str] = Field(default_factory=dict)
    health_path: str = Field(default="/health", pattern=r"^/[A-Za-z0-9/_.-]*$")
    startup_timeout_s: float = Field(default=900.0, gt=0, le=7200)
    known_answer: KnownAnswer
    agent_probe: tuple[str, ...] = Field(min_length=1, max_length=256)
    host_check: tuple[str, ...] | None = Field(
        default=None, min_length=1, max_length=256,
        description="Exits 0 when the server at {base_url} serves what the site declared "
                    "(the release's `abhed serve --check-host`); run once it is healthy.")
    agent_timeout_s: float = Field(default=300.0, gt=0, le=7200)
    probe_timeout_s: float = Field(default=1800.0, gt=0, le=14400,
                                   description="`abhed probe --quick` must finish within this.")
    agent_config: dict[str, Any] | None = Field(
        default=None, description="Written to {data}/config.json for the agent probe.")
    system_packages: tuple[str, ...] = Field(default=(), max_length=200)
    min_gpu_memory_gib: float = Field(default=0.0, ge=0, le=100_000)


def find_descriptor(bundle_dir: Path) -> Path | None:
    """The one ``models/*/abhed-serve.json`` under a staged bundle, or None."""
    found = sorted((bundle_dir / "models").glob(f"*/{DESCRIPTOR_NAME}"))
    if len(found) > 1:
        raise StepFailed(f"{len(found)} models declare a model server ({', '.join(str(p.parent.name) for p in found)}); "
                         "a bundle serves one model: remove the other abhed-serve.json files")
    return found[0] if found else None


def load_descriptor(path: Path) -> ServeDescriptor:
    """The bundle's model-server declaration, read strictly: every problem, located."""
    with reraised_as(StepFailed):
        return load_document(path, ServeDescriptor, what="model-server declaration",
                             cap=_MAX_BYTES, syntax="json",
                             hint="The bundle's model-server declaration must be fixed by its "
                                  "publisher.")


def _filler(values: Mapping[str, str], what: str) -> Callable[[re.Match[str]], str]:
    """The replacement for one ``{placeholder}``: its value, or StepFailed naming the known ones."""
    def fill(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise StepFailed(f"{what} uses unknown placeholder {{{key}}}; known: "
                             f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        return values[key]
    return fill


def expand_values(value: Any, values: Mapping[str, str], *, what: str, depth: int = 0) -> Any:
    """Fill placeholders in every string of a JSON value (keys are left as they are)."""
    if depth > 32:
        raise StepFailed(f"{what} is nested more than 32 levels deep: refused")
    if isinstance(value, str):
        return _PLACEHOLDER.sub(_filler(values, what), value)
    if isinstance(value, list):
        return [expand_values(v, values, what=what, depth=depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: expand_values(v, values, what=what, depth=depth + 1) for k, v in value.items()}
    return value


def expand(argv: tuple[str, ...], values: Mapping[str, str], *, release: Path,
           what: str) -> list[str]:
    """Fill placeholders; the program must resolve inside ``release`` (never the host's)."""
    fill = _filler(values, what)
    out = [_PLACEHOLDER.sub(fill, a) for a in argv]
    program = Path(out[0])
    if not program.is_absolute():
        raise StepFailed(f"{what}: program {out[0]!r} is not an absolute path inside the "
                         "release (use {venv}/bin/... or {release}/...)")
    root = os.path.realpath(release)
    # The program's directory is resolved (venv/bin/python is a link to the host's CPython,
    # and that is allowed); the name itself must be the release's.
    where = os.path.realpath(program.parent)
    if not is_within(where, root):
        raise StepFailed(f"{what}: program {out[0]} is outside the release {release}; the "
                         "installer only runs commands that the release itself carries")
    return out
