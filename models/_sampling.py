"""Sampling parameters: which ones exist, their ranges, and the declared list.

vLLM silently ignores a request field it does not know, so a provider whose
operator believes ``mirostat`` is applied would get no error and no effect.
Abhed therefore checks every sampling value itself, at startup, against two
lists: what the provider *declares* (config ``sampling``) and what the server
*honours* (the catalog entry's list, or the parameters Abhed knows for the api).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from models._errors import ProviderConfigError

__all__ = ["KNOWN_SAMPLING", "VLLM_SAMPLING", "SamplingParam", "check_sampling"]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class SamplingParam:
    """One request field: how to check a value and what the rule is in words."""

    name: str
    rule: str
    check: Callable[[Any], bool]


def _p(name: str, rule: str, check: Callable[[Any], bool]) -> SamplingParam:
    return SamplingParam(name, rule, check)


_PARAMS = [
    _p("temperature", "a number >= 0", lambda v: _is_number(v) and v >= 0),
    _p("top_p", "a number with 0 < top_p <= 1", lambda v: _is_number(v) and 0 < v <= 1),
    _p("top_k", "an integer: -1 or 0 (off) or >= 1", lambda v: _is_int(v) and v >= -1),
    _p("min_p", "a number with 0 <= min_p <= 1", lambda v: _is_number(v) and 0 <= v <= 1),
    _p("seed", "an integer", _is_int),
    _p("presence_penalty", "a number in [-2, 2]", lambda v: _is_number(v) and -2 <= v <= 2),
    _p("frequency_penalty", "a number in [-2, 2]", lambda v: _is_number(v) and -2 <= v <= 2),
    _p("repetition_penalty", "a number > 0", lambda v: _is_number(v) and v > 0),
    _p("max_tokens", "an integer >= 1", lambda v: _is_int(v) and v >= 1),
    _p("stop", "a list of at most 16 non-empty strings",
       lambda v: isinstance(v, list) and len(v) <= 16
       and all(isinstance(s, str) and 0 < len(s) <= 256 for s in v)),
]

KNOWN_SAMPLING: dict[str, SamplingParam] = {p.name: p for p in _PARAMS}
"""Every sampling parameter Abhed can check and send on the ``openai`` api."""

VLLM_SAMPLING: tuple[str, ...] = tuple(KNOWN_SAMPLING)
"""What vLLM's OpenAI server honours of those (all of them, as of vLLM 0.32)."""


def check_sampling(provider: str, declared: Iterable[str], values: Mapping[str, Any], *,
                   honoured: Iterable[str] | None = None, where: str = "params") -> dict[str, Any]:
    """Refuse an undeclared, unhonoured or out-of-range value; return the values to send.

    ``declared`` is the provider's list, ``honoured`` the server's (defaults to
    every parameter Abhed knows).  Raises :class:`ProviderConfigError` naming the
    parameter and the declared list, so the operator can fix one line.
    """
    declared = tuple(declared)
    honour = tuple(honoured) if honoured is not None else tuple(KNOWN_SAMPLING)
    for name in declared:
        if name not in KNOWN_SAMPLING or name not in honour:
            raise ProviderConfigError(
                f"provider {provider!r} declares sampling parameter {name!r}, which the server "
                f"does not honour (it honours: {', '.join(honour)}). vLLM would silently ignore "
                f"it; remove {name!r} from the provider's \"sampling\" list."
            )
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in declared:
            raise ProviderConfigError(
                f"provider {provider!r}: sampling parameter {name!r} in {where} is not in its "
                f"declared list [{', '.join(declared)}]; add it to \"sampling\" if the server "
                "honours it, or remove the value."
            )
        param = KNOWN_SAMPLING[name]
        if not param.check(value):
            raise ProviderConfigError(
                f"provider {provider!r}: {name} = {value!r} in {where} is out of range; "
                f"it must be {param.rule}."
            )
        out[name] = value
    return out
