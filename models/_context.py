"""How many positions a model directory says it takes: what a catalog's ``max_model_len`` may be.

vLLM refuses to start when ``--max-model-len`` is over what the model's own
``config.json`` allows, and only then, deep in a start-up log.  ``abhed
catalog add`` (and ``bundle gather``, through the same presets) read the
limit here first, the way vLLM's CPU/GPU build derives it
(``vllm/transformers_utils/model_arch_config_convertor.py``,
``derive_max_model_len_and_key``, and ``vllm/config/model.py``,
``_get_and_verify_max_len``; read, not copied):

* the smallest of the position keys present in the text model's config
  (``text_config`` for a multimodal model): ``max_position_embeddings``,
  ``n_positions``, ``max_seq_len``, ``seq_length``, ``max_target_positions``,
  ``max_sequence_length``, ``max_seq_length``, ``seq_len``; a
  ``model_max_length`` there wins over them (Command-R);
* at most ``tokenizer_config.json``'s ``model_max_length``;
* times a RoPE scaling ``factor``, except for the kinds whose position count is
  already scaled (``su``, ``longrope``, ``llama3``, ``yarn``, ``deepseek_yarn``,
  ``deepseek_llama_scaling``).

A directory whose config names none of these (Mistral's ``params.json``) has
no known limit: nothing is checked, as vLLM then takes what it is given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ContextLimit", "model_context_limit"]

_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                  "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
_PRESCALED = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
_MAX_CONFIG_BYTES = 4 << 20  # a config.json is a few KiB; a bigger one is not read


@dataclass(frozen=True)
class ContextLimit:
    """The most tokens the model takes, and what in its files says so."""

    tokens: int
    source: str  # e.g. "config.json max_position_embeddings 8192"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_CONFIG_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_CONFIG_BYTES:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _count(value: object) -> int | None:
    """A position count as a config writes it (an int, or a float such as 8192.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value <= 0 or value == float("inf"):
        return None
    return int(value)


def _rope_factor(config: dict[str, Any]) -> tuple[float, str]:
    """The RoPE scaling factor that multiplies the position count (1.0: none)."""
    for key in ("rope_scaling", "rope_parameters"):
        rope = config.get(key)
        if not isinstance(rope, dict):
            continue
        kind = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor")
        if kind in _PRESCALED or isinstance(factor, bool) or not isinstance(factor, int | float):
            continue
        if factor > 0 and factor == factor and factor != float("inf"):
            return float(factor), f" x {key} factor {factor:g} ({kind})"
    return 1.0, ""


def model_context_limit(directory: Path) -> ContextLimit | None:
    """The model's own context limit, read from its ``config.json`` (None: it names none)."""
    config = _read(directory / "config.json")
    if config is None:
        return None
    text = config.get("text_config")
    text = text if isinstance(text, dict) else config
    found: tuple[int, str] | None = None
    for key in _POSITION_KEYS:
        n = _count(text.get(key))
        if n is not None and (found is None or n < found[0]):
            found = (n, key)
    declared = _count(text.get("model_max_length"))
    if declared is not None:
        found = (declared, "model_max_length")
    if found is None:
        return None
    tokens, key = found
    source = f"config.json {key} {tokens}"
    tokenizer = _read(directory / "tokenizer_config.json") or {}
    capped = _count(tokenizer.get("model_max_length"))
    if capped is not None and capped < tokens:
        tokens, source = capped, f"tokenizer_config.json model_max_length {capped}"
    factor, said = _rope_factor(text)
    if factor != 1.0:
        tokens, source = int(tokens * factor), source + said
    return ContextLimit(tokens, source)
