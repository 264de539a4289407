"""Model providers and local serving.

Public surface: provider configuration (:class:`ProviderConfig`), the
OpenAI-compatible client (:class:`OpenAIClient`) and provider
(:class:`OpenAIProvider`, :func:`open_provider`), the wire-neutral request and
reply types, sampling checks (:func:`check_sampling`), the model catalog
(:class:`Catalog`, :class:`CatalogEntry`, a model's own context limit
:func:`model_context_limit`) and the model-family presets that
write its entries (:data:`PRESETS`, :func:`entry_from_preset`), the vLLM launcher
(:class:`VllmServer`) and a user's on-demand local service (:class:`LocalService`),
the weights' OpenSSF model signatures (:func:`sign_model`, :func:`verify_model`,
:func:`signature_identity`), and the model service's request record
(:class:`RequestLog` of :class:`RequestRecord`, :func:`read_requests`,
:func:`request_ids` and the headers the agent sends, :data:`SESSION_HEADER`,
:data:`REQUEST_HEADER`).

The servers live in public modules this package does not import, so that
``import models`` (every ``abhed tool`` call imports it for its settings) does
not load them (docs/performance.md, "Fifth pass"):

* ``models.scripted``: the scripted test server (:class:`ScriptedServer`, its
  steps read by :func:`read_script`; ``python -m models.scripted``);
* ``models.service``: the site's model service, the relay on every engineer's
  host (``ModelRelay``) and the front on every model host (``ModelFront``),
  docs/model-service.md;
* ``models.bundle_kit``: what a bundle build needs of models (presets, the vLLM
  command, the model signature), ``BUNDLE_KIT``, which ``abhed bundle`` hands
  ``bundle`` (its ``ModelKit``).

Errors: :class:`ModelsError` is the root, for those modules too; its tree is
drawn in ``models._errors``.  httpx is imported only when a client is built, so
importing this package is cheap.
"""

from __future__ import annotations

from models._catalog import TOOL_CALL_PARSERS, Catalog, CatalogEntry, hash_weights, load_catalog
from models._context import ContextLimit, model_context_limit
from models._errors import (
    HostMismatch,
    ModelNotFound,
    ModelsError,
    ModelStreamLost,
    ProviderConfigError,
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderUnavailable,
    RequestCancelled,
    RequestLogBroken,
    RequestLogError,
    ServeError,
)
from models._host_check import HostDeclaration, check_model_host, weights_digest
from models._local_service import LocalService, ServiceHold
from models._openai import OpenAIClient
from models._presets import PRESETS, Preset, entry_from_preset, get_preset, suggest_tensor_parallel
from models._probe_bar import PROBE_FAMILIES, ProbeBar
from models._provider import OpenAIProvider, open_provider
from models._provider_config import SUPPORTED_APIS, ProviderConfig
from models._request_log import (
    LISTING_ENDPOINTS,
    REQUEST_HEADER,
    SESSION_HEADER,
    RequestLog,
    RequestRecord,
    StoredRequest,
    read_requests,
    request_ids,
)
from models._sampling import KNOWN_SAMPLING, VLLM_SAMPLING, check_sampling
from models._scale import RouterSettings, check_parallel_fit, router_command
from models._serve import OFFLINE_ENV, ServeSettings, VllmServer
from models._signature import (
    MODEL_SIGNATURE,
    MODEL_SIGNING_PUB,
    public_key_pem,
    sign_model,
    signature_identity,
    verify_model,
)
from models._site_tls import GATE_ENGINEER
from models._types import CancelToken, ChatRequest, Delta, ModelReply, Provider, ToolCall, Usage

__all__ = [
    "ModelStreamLost",
    "HostDeclaration",
    "HostMismatch",
    "RouterSettings",
    "check_model_host",
    "check_parallel_fit",
    "router_command",
    "weights_digest",
    "GATE_ENGINEER",
    "KNOWN_SAMPLING",
    "LISTING_ENDPOINTS",
    "LocalService",
    "MODEL_SIGNATURE",
    "MODEL_SIGNING_PUB",
    "OFFLINE_ENV",
    "PRESETS",
    "PROBE_FAMILIES",
    "REQUEST_HEADER",
    "SESSION_HEADER",
    "SUPPORTED_APIS",
    "TOOL_CALL_PARSERS",
    "VLLM_SAMPLING",
    "CancelToken",
    "Catalog",
    "CatalogEntry",
    "ChatRequest",
    "ContextLimit",
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
    "RequestLog",
    "RequestLogBroken",
    "RequestLogError",
    "RequestRecord",
    "ServeError",
    "ServeSettings",
    "ServiceHold",
    "StoredRequest",
    "ToolCall",
    "Usage",
    "VllmServer",
    "check_sampling",
    "entry_from_preset",
    "get_preset",
    "hash_weights",
    "load_catalog",
    "model_context_limit",
    "open_provider",
    "public_key_pem",
    "read_requests",
    "request_ids",
    "sign_model",
    "signature_identity",
    "suggest_tensor_parallel",
    "verify_model",
]
