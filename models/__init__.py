"""Model providers and local serving.

Public surface: provider configuration (:class:`ProviderConfig`), the
OpenAI-compatible client (:class:`OpenAIClient`) and provider
(:class:`OpenAIProvider`, :func:`open_provider`), the wire-neutral request and
reply types, sampling checks (:func:`check_sampling`), the model catalog
(:class:`Catalog`, :class:`CatalogEntry`) and the model-family presets that
write its entries (:data:`PRESETS`, :func:`entry_from_preset`), the vLLM launcher
(:class:`VllmServer`) and the scripted test server (:class:`ScriptedServer`).

Errors: :class:`ModelsError` is the root; its tree is drawn in ``models._errors``.
httpx is imported only when a client is built, so importing this package is cheap.

Names load on first use (PEP 562), so importing the package stays cheap;
see ``appliance/__init__.py`` for why start-up cares.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from models._catalog import TOOL_CALL_PARSERS, Catalog, CatalogEntry, hash_weights, load_catalog
    from models._errors import (
        ModelNotFound,
        ModelsError,
        ProviderConfigError,
        ProviderError,
        ProviderHTTPError,
        ProviderProtocolError,
        ProviderUnavailable,
        RequestCancelled,
        ServeError,
    )
    from models._openai import OpenAIClient
    from models._presets import (
        PRESETS,
        Preset,
        entry_from_preset,
        get_preset,
        suggest_tensor_parallel,
    )
    from models._probe_bar import PROBE_FAMILIES, ProbeBar
    from models._provider import OpenAIProvider, open_provider
    from models._provider_config import SUPPORTED_APIS, ProviderConfig
    from models._sampling import KNOWN_SAMPLING, VLLM_SAMPLING, check_sampling
    from models._scripted import ScriptedCall, ScriptedServer, ScriptStep
    from models._serve import OFFLINE_ENV, ServeSettings, VllmServer
    from models._types import CancelToken, ChatRequest, Delta, ModelReply, Provider, ToolCall, Usage

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "CancelToken": "models._types",
    "Catalog": "models._catalog",
    "CatalogEntry": "models._catalog",
    "ChatRequest": "models._types",
    "check_sampling": "models._sampling",
    "Delta": "models._types",
    "entry_from_preset": "models._presets",
    "get_preset": "models._presets",
    "hash_weights": "models._catalog",
    "KNOWN_SAMPLING": "models._sampling",
    "load_catalog": "models._catalog",
    "ModelNotFound": "models._errors",
    "ModelReply": "models._types",
    "ModelsError": "models._errors",
    "OFFLINE_ENV": "models._serve",
    "open_provider": "models._provider",
    "OpenAIClient": "models._openai",
    "OpenAIProvider": "models._provider",
    "Preset": "models._presets",
    "PRESETS": "models._presets",
    "PROBE_FAMILIES": "models._probe_bar",
    "ProbeBar": "models._probe_bar",
    "Provider": "models._types",
    "ProviderConfig": "models._provider_config",
    "ProviderConfigError": "models._errors",
    "ProviderError": "models._errors",
    "ProviderHTTPError": "models._errors",
    "ProviderProtocolError": "models._errors",
    "ProviderUnavailable": "models._errors",
    "RequestCancelled": "models._errors",
    "ScriptedCall": "models._scripted",
    "ScriptedServer": "models._scripted",
    "ScriptStep": "models._scripted",
    "ServeError": "models._errors",
    "ServeSettings": "models._serve",
    "suggest_tensor_parallel": "models._presets",
    "SUPPORTED_APIS": "models._provider_config",
    "TOOL_CALL_PARSERS": "models._catalog",
    "ToolCall": "models._types",
    "Usage": "models._types",
    "VLLM_SAMPLING": "models._sampling",
    "VllmServer": "models._serve",
}

__all__ = [
    "KNOWN_SAMPLING",
    "OFFLINE_ENV",
    "PRESETS",
    "PROBE_FAMILIES",
    "SUPPORTED_APIS",
    "TOOL_CALL_PARSERS",
    "VLLM_SAMPLING",
    "CancelToken",
    "Catalog",
    "CatalogEntry",
    "ChatRequest",
    "Delta",
    "ModelNotFound",
    "ModelReply",
    "ModelsError",
    "OpenAIClient",
    "OpenAIProvider",
    "Preset",
    "ProbeBar",
    "Provider",
    "ProviderConfig",
    "ProviderConfigError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderUnavailable",
    "RequestCancelled",
    "ScriptStep",
    "ScriptedCall",
    "ScriptedServer",
    "ServeError",
    "ServeSettings",
    "ToolCall",
    "Usage",
    "VllmServer",
    "check_sampling",
    "entry_from_preset",
    "get_preset",
    "hash_weights",
    "load_catalog",
    "open_provider",
    "suggest_tensor_parallel",
]

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all

    def __getattr__(name: str) -> typing.Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'models' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_EXPORTS))
