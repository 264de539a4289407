"""Model-family presets: what vLLM needs to serve each family well, in one table.

A catalog entry written by hand is where serving goes quietly wrong: the wrong
tool-call parser makes every tool call plain text, a missing reasoning parser
leaks the model's thinking into its answer, a context longer than the KV cache
fits makes vLLM refuse to start.  So ``abhed catalog add DIR --family F`` and
``abhed bundle gather`` write entries from this table, one row per family,
each with its sources (the model card and vLLM's own recipe or tool-calling
docs, listed in docs/models.md) and what this project has checked itself.

``tp_by_gpu_gib`` suggests a tensor-parallel size per GPU memory for the
family's reference checkpoint (``reference``): the smallest TP whose per-GPU
share of the weights leaves room for a useful KV cache (about a quarter of the
GPU).  It is a starting point the operator confirms with ``nvidia-smi`` and
vLLM's own log, never a guarantee.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models._catalog import CatalogEntry, hash_weights
from models._context import model_context_limit
from models._errors import ProviderConfigError
from models._sampling import VLLM_SAMPLING

__all__ = ["PRESETS", "Preset", "entry_from_preset", "get_preset", "suggest_tensor_parallel"]

_FULL = VLLM_SAMPLING


@dataclass(frozen=True)
class Preset:
    """One model family as vLLM serves it.

    Attributes:
        family: the name ``--family`` takes.
        summary: which models it covers.
        tool_call_parser / reasoning_parser: vLLM's ``--tool-call-parser`` and
            ``--reasoning-parser`` (None: the family does not think aloud).
        chat_template: ``"tokenizer"`` (use the checkpoint's own template) or a
            file name inside the model directory that must exist.
        default_context / max_context: the ``max_model_len`` written, and the
            most the family supports (vLLM refuses more).
        dtype: written to the entry.
        sampling: the parameters vLLM honours for it (the declared list).
        recommended: the model card's sampling values (for provider ``params``).
        reference / weights_gib: the checkpoint ``tp_by_gpu_gib`` was sized for.
        tp_by_gpu_gib: (GPU memory GiB, tensor-parallel size), smallest first.
        extra_args: vLLM flags the family needs.
        sources: where each value comes from.
        checked: what this project ran itself.
    """

    family: str
    summary: str
    tool_call_parser: str
    reasoning_parser: str | None
    chat_template: str
    default_context: int
    max_context: int
    dtype: str = "auto"
    sampling: tuple[str, ...] = _FULL
    recommended: Mapping[str, float | int] = field(default_factory=dict)
    reference: str = ""
    weights_gib: float = 0.0
    tp_by_gpu_gib: tuple[tuple[int, int], ...] = ()
    extra_args: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    checked: str = "not run here (no GPU in CI); values from the sources"
    probe: Mapping[str, Any] | None = None  # the capability probe's bar (None: the default)


_CPU_ARGS = ("--enforce-eager", "--structured-outputs-config",
             '{"backend":"xgrammar","disable_any_whitespace":true}')

PRESETS: tuple[Preset, ...] = (
    Preset(
        family="qwen3-coder", summary="Qwen3-Coder-30B-A3B-Instruct, Qwen3-Coder-480B-A35B-Instruct",
        tool_call_parser="qwen3_coder", reasoning_parser=None, chat_template="tokenizer",
        default_context=65536, max_context=262144,
        recommended={"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05},
        reference="Qwen3-Coder-30B-A3B-Instruct (BF16)", weights_gib=57,
        tp_by_gpu_gib=((24, 4), (48, 2), (80, 1)),
        sources=("https://huggingface.co/Qwen/Qwen3-Coder-30B-A3B-Instruct",
                 "https://docs.vllm.ai/en/latest/features/tool_calling.html (qwen3_coder)",
                 "https://docs.vllm.ai/projects/recipes/en/latest/Qwen/Qwen3-Coder-480B-A35B.html")),
    Preset(
        family="qwen2.5-coder", summary="Qwen2.5-Coder-{1.5,7,14,32}B-Instruct",
        tool_call_parser="hermes", reasoning_parser=None, chat_template="tokenizer",
        default_context=32768, max_context=32768,
        recommended={"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05},
        reference="Qwen2.5-Coder-32B-Instruct (BF16)", weights_gib=61,
        tp_by_gpu_gib=((24, 4), (48, 2), (80, 1)),
        sources=("https://huggingface.co/Qwen/Qwen2.5-Coder-32B-Instruct",
                 "https://docs.vllm.ai/en/latest/features/tool_calling.html (hermes: Qwen2.5)")),
    Preset(
        family="devstral", summary="Devstral-Small-2505/2507 (24B), Devstral-Medium",
        tool_call_parser="mistral", reasoning_parser=None, chat_template="tokenizer",
        default_context=65536, max_context=131072,
        recommended={"temperature": 0.15},
        reference="Devstral-Small-2507 (BF16)", weights_gib=44,
        tp_by_gpu_gib=((24, 4), (48, 2), (80, 1)),
        extra_args=("--tokenizer-mode", "mistral", "--config-format", "mistral",
                    "--load-format", "mistral"),
        sources=("https://huggingface.co/mistralai/Devstral-Small-2507",
                 "https://docs.vllm.ai/en/latest/features/tool_calling.html (mistral)")),
    Preset(
        family="gpt-oss", summary="gpt-oss-20b, gpt-oss-120b (MXFP4)",
        tool_call_parser="openai", reasoning_parser="openai_gptoss", chat_template="tokenizer",
        default_context=65536, max_context=131072,
        recommended={"temperature": 1.0, "top_p": 1.0},
        reference="gpt-oss-120b (MXFP4)", weights_gib=61,
        tp_by_gpu_gib=((48, 2), (80, 1)),
        sources=("https://huggingface.co/openai/gpt-oss-120b",
                 "https://docs.vllm.ai/projects/recipes/en/latest/OpenAI/GPT-OSS.html")),
    Preset(
        family="glm-4.5", summary="GLM-4.5, GLM-4.5-Air, GLM-4.6 (same parsers; 4.6 has 200K context)",
        tool_call_parser="glm45", reasoning_parser="glm45", chat_template="tokenizer",
        default_context=65536, max_context=202752,
        recommended={"temperature": 0.6, "top_p": 0.95},
        reference="GLM-4.5-Air-FP8", weights_gib=104,
        tp_by_gpu_gib=((80, 2), (141, 1)),
        sources=("https://huggingface.co/zai-org/GLM-4.5-Air",
                 "https://huggingface.co/zai-org/GLM-4.6",
                 "https://docs.vllm.ai/projects/recipes/en/latest/GLM/GLM-4.5.html")),
    Preset(
        family="tiny-test", summary="the test suite's tiny Qwen2-style model (tests/models/tiny_model.py)",
        tool_call_parser="hermes", reasoning_parser=None, chat_template="chat_template.jinja",
        default_context=8192, max_context=8192, dtype="float32",
        sampling=("temperature", "top_p", "top_k", "seed", "max_tokens"),
        extra_args=_CPU_ARGS, reference="tiny-model (random weights)", weights_gib=0.01,
        tp_by_gpu_gib=((1, 1),),
        sources=("tests/models/tiny_model.py",),
        checked="served by vLLM's CPU build in CI (tests/models/test_vllm_real.py)",
        probe={"families": ["wire"], "quick_families": ["wire"], "min_rate": {},
               "tool_choice": "named",
               "note": "random-weight test model: it makes schema-valid calls only under a "
                       "named tool choice, so its bar is the wire family's hard gates"}),
    Preset(
        family="smollm2", summary="SmolLM2-135M-Instruct converted by scripts/smollm2_model.py",
        tool_call_parser="hermes", reasoning_parser=None, chat_template="chat_template.jinja",
        default_context=8192, max_context=8192, dtype="float32",
        sampling=("temperature", "top_p", "top_k", "seed", "max_tokens", "repetition_penalty"),
        extra_args=_CPU_ARGS, reference="SmolLM2-135M-Instruct (float32)", weights_gib=0.6,
        tp_by_gpu_gib=((1, 1),),
        sources=("https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
                 "scripts/smollm2_model.py"),
        checked="served by vLLM's CPU build and answers the demo question (scripts/demo)",
        probe={"families": ["wire"], "quick_families": ["wire"], "min_rate": {},
               "tool_choice": "named",
               "note": "135M demo model: its bar is the wire family's hard gates under a "
                       "named tool choice, as the demo uses it, and it fails even that (64% "
                       "schema-valid calls measured): install it with --accept-probe-failure"}),
)


def get_preset(family: str) -> Preset:
    """The preset for ``family``; an unknown one is refused with the list."""
    for p in PRESETS:
        if p.family == family:
            return p
    raise ProviderConfigError(f"unknown model family {family!r}; known families: "
                              f"{', '.join(p.family for p in PRESETS)}")


def suggest_tensor_parallel(preset: Preset, gpu_gib: float | None) -> int:
    """The preset's tensor-parallel size for GPUs of ``gpu_gib`` (1 when unknown)."""
    if gpu_gib is None or not preset.tp_by_gpu_gib:
        return 1
    fitting = [tp for gib, tp in preset.tp_by_gpu_gib if gpu_gib >= gib]
    return fitting[-1] if fitting else preset.tp_by_gpu_gib[0][1] * 2


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink())


def _name_from_dir(directory: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", directory.name).strip("-._").lower()[:64]
    return name or "model"


def entry_from_preset(directory: Path, family: str, *, name: str | None = None,
                      served_name: str | None = None, weights_dir: str | None = None,
                      max_model_len: int | None = None, gpu_gib: float | None = None,
                      tensor_parallel_size: int | None = None,
                      files: Mapping[str, str] | None = None) -> CatalogEntry:
    """A catalog entry for the model in ``directory``: every file hashed, the rest from
    the family's preset.

    ``files`` takes digests already computed (gather hashes once); ``weights_dir`` is
    what the entry records (default: ``directory`` itself, absolute).

    Raises:
        ProviderConfigError: unknown family, no such directory, no ``config.json``,
            a context over the family's maximum or over the model's own limit
            (:func:`model_context_limit`; the family's default is capped to it
            instead), or a named chat template missing.
    """
    preset = get_preset(family)
    if not directory.is_dir():
        raise ProviderConfigError(f"{directory} is not a directory holding a model")
    if not (directory / "config.json").is_file() and not (directory / "params.json").is_file():
        raise ProviderConfigError(f"{directory} has no config.json: not a Hugging Face model "
                                  "directory (docs/bundle.md shows how to fetch one)")
    if preset.chat_template != "tokenizer" and not (directory / preset.chat_template).is_file():
        raise ProviderConfigError(f"the {family} preset serves with {preset.chat_template}, "
                                  f"which {directory} lacks")
    # The model's own limit bounds the entry (vLLM would refuse to start over it, late and
    # in its log): the family's default is capped to it; a length asked for is refused.
    limit = model_context_limit(directory)
    ctx = max_model_len or preset.default_context
    if limit is not None and ctx > limit.tokens:
        if max_model_len is not None:
            raise ProviderConfigError(
                f"max_model_len {ctx} is over what the model in {directory} takes: its "
                f"{limit.source}; ask for {limit.tokens} or less (--max-model-len {limit.tokens})")
        ctx = limit.tokens
    if ctx > preset.max_context:
        raise ProviderConfigError(f"max_model_len {ctx} is over the {family} family's "
                                  f"{preset.max_context}")
    digests = dict(files) if files is not None else hash_weights(directory)
    tp = tensor_parallel_size or suggest_tensor_parallel(preset, gpu_gib)
    model_name = name or _name_from_dir(directory)
    data: dict[str, Any] = {
        "name": model_name, "served_name": served_name or model_name,
        "weights_dir": weights_dir or str(directory.resolve()), "files": digests,
        "chat_template": None if preset.chat_template == "tokenizer" else preset.chat_template,
        "tool_call_parser": preset.tool_call_parser, "reasoning_parser": preset.reasoning_parser,
        "max_model_len": ctx, "tensor_parallel_size": tp, "dtype": preset.dtype,
        "sampling": list(preset.sampling), "extra_args": list(preset.extra_args),
        "min_memory_gib": round(_size(directory) / 2**30, 2),
    }
    if preset.probe is not None:
        data["probe"] = dict(preset.probe)
    try:
        return CatalogEntry.model_validate(json.loads(json.dumps(data)))
    except ValueError as exc:
        raise ProviderConfigError(f"cannot write an entry for {directory}: {exc}") from None
