"""The model catalog: what a served model is, down to the sha256 of each file.

A catalog entry is everything ``abhed serve`` needs to start vLLM for one model
and everything a provider needs to know about what that server honours.  The
weights are checked against the recorded digests before vLLM is started, so an
altered file is refused by name instead of being served.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from foundation import FileMissing, FoundationError, NotRegularFile, digest_file, load_document
from models._errors import ProviderConfigError, ServeError
from models._host_check import HostDeclaration, weights_digest
from models._probe_bar import ProbeBar
from models._sampling import KNOWN_SAMPLING, VLLM_SAMPLING
from models._scale import check_parallel_fit

__all__ = ["MAX_CATALOG_BYTES", "REASONING_PARSERS", "TOOL_CALL_PARSERS", "Catalog", "CatalogEntry", "hash_weights", "load_catalog"]

# A catalog lists a few models, each with a digest per weight file: a few KiB to a
# few hundred. Far more is not a catalog, and is refused before it is parsed.
MAX_CATALOG_BYTES = 16 << 20

TOOL_CALL_PARSERS: tuple[str, ...] = (
    "hermes", "qwen3_coder", "qwen3_xml", "llama3_json", "llama4_pythonic", "mistral",
    "pythonic", "granite", "internlm", "jamba", "deepseek_v3", "glm45", "kimi_k2", "openai",
)

REASONING_PARSERS: tuple[str, ...] = (
    "deepseek_r1", "deepseek_v3", "qwen3", "glm45", "openai_gptoss", "mistral", "granite",
    "hunyuan_a13b", "step3", "seed_oss", "ernie45", "minimax_m2",
)


class CatalogEntry(BaseModel):
    """One model that can be served."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    served_name: str = Field(min_length=1, max_length=128,
                             description="The name clients put in requests' \"model\".")
    weights_dir: str = Field(description="Absolute, or relative to the catalog file's folder.")
    files: dict[str, str] = Field(default_factory=dict,
                                  description="Relative path -> sha256 of every weights file.")
    chat_template: str | None = Field(
        default=None, description="Jinja file (relative to weights_dir); default: the tokenizer's own.")
    tool_call_parser: str = "hermes"
    max_model_len: int = Field(default=8192, ge=64, le=10_000_000)
    tensor_parallel_size: int = Field(default=1, ge=1, le=64,
                                      description="GPUs one copy of the model is split across.")
    pipeline_parallel_size: int = Field(
        default=1, ge=1, le=64,
        description="Pipeline stages (across hosts with Ray); GPUs used = tensor x pipeline.")
    data_parallel_size: int = Field(
        default=1, ge=1, le=64,
        description="Copies of the model on one host, vLLM balancing between them; GPUs used = "
                    "tensor x pipeline x data.")
    distributed_executor_backend: Literal["mp", "ray"] | None = Field(
        default=None, description="vLLM's executor: 'ray' for serving across several hosts.")
    gpus_per_host: int | None = Field(
        default=None, ge=1, le=64,
        description="GPUs each model host has; the parallel sizes must fit them (None: unchecked).")
    vllm_version: str | None = Field(
        default=None, min_length=1, max_length=64,
        description="vLLM version the site serves this model with; a host on another is refused.")
    hosts: int = Field(default=1, ge=1, le=64,
                       description="Hosts one copy spans (pipeline stages on Ray); 1 without Ray.")
    reasoning_parser: str | None = Field(
        default=None, description="vLLM's --reasoning-parser for models that think aloud.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    sampling: tuple[str, ...] = Field(default=VLLM_SAMPLING,
                                      description="Sampling parameters this vLLM version honours.")
    extra_args: tuple[str, ...] = Field(default=(), description="Further vLLM flags, verbatim.")
    min_memory_gib: float = Field(default=0, ge=0, description="Memory the model needs (a preflight hint).")
    probe: ProbeBar = Field(default_factory=ProbeBar,
                            description="What `abhed probe` runs for this model and must reach.")

    @field_validator("tool_call_parser")
    @classmethod
    def _parser(cls, v: str) -> str:
        if v not in TOOL_CALL_PARSERS:
            raise ValueError(f"tool_call_parser {v!r} is unknown; use one of {', '.join(TOOL_CALL_PARSERS)}")
        return v

    @field_validator("reasoning_parser")
    @classmethod
    def _reasoning(cls, v: str | None) -> str | None:
        if v is not None and v not in REASONING_PARSERS:
            raise ValueError(f"reasoning_parser {v!r} is unknown; use one of "
                             f"{', '.join(REASONING_PARSERS)}")
        return v

    @field_validator("sampling")
    @classmethod
    def _sampling(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [s for s in v if s not in KNOWN_SAMPLING]
        if unknown:
            raise ValueError(f"sampling lists parameters Abhed cannot check: {', '.join(unknown)}")
        return v

    @model_validator(mode="after")
    def _fits(self) -> CatalogEntry:
        check_parallel_fit(tensor=self.tensor_parallel_size, pipeline=self.pipeline_parallel_size,
                           data=self.data_parallel_size, gpus_per_host=self.gpus_per_host,
                           hosts=self.hosts, backend=self.distributed_executor_backend)
        return self

    @field_validator("files")
    @classmethod
    def _files(cls, v: dict[str, str]) -> dict[str, str]:
        for rel, digest in v.items():
            if rel.startswith("/") or ".." in Path(rel).parts or not rel:
                raise ValueError(f"files: {rel!r} must be a relative path inside weights_dir")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"files: {rel!r} needs a lowercase hex sha256, got {digest!r}")
        return v

    def host_declaration(self) -> HostDeclaration:
        """What a model host serving this entry must answer with (models._host_check)."""
        return HostDeclaration(served_name=self.served_name, max_model_len=self.max_model_len,
                               vllm_version=self.vllm_version,
                               weights_digest=weights_digest(self.files) if self.files else None)

    def weights_path(self, base: Path | None = None) -> Path:
        p = Path(self.weights_dir).expanduser()
        return p if p.is_absolute() or base is None else base / p

    def verify_weights(self, base: Path | None = None) -> Path:
        """Check every recorded file's sha256; raise :class:`ServeError` naming the first bad one.

        A signed model directory (``model.sig``, docs/bundle.md) is checked against its
        OpenSSF model signature instead, whose statement must list the catalog's digests.
        """
        root = self.weights_path(base)
        if not root.is_dir():
            raise ServeError(
                f"weights for {self.name!r} are missing: {root} is not a directory. Install the "
                "bundle that carries them, or fix weights_dir in the catalog.", reason="weights_missing")
        if not self.files:
            raise ServeError(f"catalog entry {self.name!r} records no file digests; run "
                             "`abhed serve --hash DIR` and add them", reason="weights_unverified")
        from models._signature import MODEL_SIGNATURE, signed_digests, verify_model

        signed: dict[str, str] = {}
        if (root / MODEL_SIGNATURE).is_file():
            # Signed (OpenSSF model signing): one pass hashes every file against the
            # signature, and the catalog's digests must be the signed ones.
            verify_model(root)
            signed = signed_digests(root)
            for rel, want in sorted(self.files.items()):
                if rel in signed and signed[rel] != want:
                    raise ServeError(
                        f"catalog entry {self.name!r} and the model's signature disagree about "
                        f"{rel}: the catalog says {want}, the signature {signed[rel]}. Do not "
                        "serve it; reinstall the model from its verified bundle.",
                        reason="weights_altered")
        unsigned = {rel: want for rel, want in self.files.items() if rel not in signed}
        # What the signature does not cover (git files it leaves out, or an unsigned model).
        for rel, want in sorted(unsigned.items()):
            f = root / rel
            try:
                got = digest_file(f).sha256
            except FileNotFoundError:
                raise ServeError(f"weights file {f} is missing (catalog entry {self.name!r}); "
                                 "reinstall the model.", reason="weights_missing") from None
            except NotRegularFile as exc:
                raise ServeError(f"weights file {f} is {exc.kind}, not a file: it was replaced. "
                                 "Do not serve it; reinstall the model from the verified bundle.",
                                 reason="weights_altered") from None
            if got != want:
                raise ServeError(f"weights file {f} was altered: sha256 {got}, catalog says {want}. "
                                 "Do not serve it; reinstall the model from the verified bundle.",
                                 reason="weights_altered")
        return root


def hash_weights(root: Path) -> dict[str, str]:
    """sha256 of every regular file under ``root`` (for writing a catalog entry)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out[p.relative_to(root).as_posix()] = digest_file(p).sha256
    return out


class Catalog(BaseModel):
    """A list of entries, and the folder relative weights_dir values start from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[CatalogEntry, ...] = ()
    base_dir: str | None = None

    def get(self, name: str | None) -> CatalogEntry:
        if not self.models:
            raise ProviderConfigError("the model catalog is empty; add an entry to catalog.json "
                                      "(see docs/providers.md)")
        if name is None:
            return self.models[0]
        for m in self.models:
            if m.name == name or m.served_name == name:
                return m
        raise ProviderConfigError(f"no catalog entry named {name!r}; the catalog has: "
                                  f"{', '.join(m.name for m in self.models)}")

    def base(self) -> Path | None:
        return Path(self.base_dir) if self.base_dir else None


def load_catalog(path: Path) -> Catalog:
    """Read a catalog JSON file (``{"models": [...]}``) strictly; absent means empty.

    Raises:
        ProviderConfigError: unreadable, not JSON, or invalid; every problem, located.
    """
    def base_dir(raw: dict[str, Any]) -> None:
        raw.setdefault("base_dir", str(path.parent))

    try:
        return load_document(path, Catalog, what="model catalog", cap=MAX_CATALOG_BYTES,
                             syntax="json", prepare=base_dir,
                             hint="Fix the catalog (docs/providers.md), or write its entries with "
                                  "`abhed catalog add`.")
    except FileMissing:
        return Catalog(base_dir=str(path.parent))
    except FoundationError as exc:
        raise ProviderConfigError(str(exc)) from None