"""A configured provider: a client, a served model name, and checked sampling.

Everything that can be refused is refused in :func:`open_provider`, before the
first request: the api, the declared list against what the server honours,
every configured or requested value against the declared list and its range.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from models._catalog import Catalog
from models._credentials import read_api_key, tls_context
from models._errors import ModelNotFound, ProviderConfigError
from models._openai import OpenAIClient
from models._provider_config import SUPPORTED_APIS, ProviderConfig
from models._sampling import check_sampling
from models._types import CancelToken, ChatRequest, Delta, ModelReply

__all__ = ["OpenAIProvider", "open_provider"]


class OpenAIProvider:
    """A provider speaking the OpenAI chat-completions api (vLLM, and others)."""

    def __init__(self, config: ProviderConfig, client: OpenAIClient, model: str,
                 sampling: dict[str, Any]) -> None:
        self.config = config
        self.name = config.name
        self.client = client
        self.model = model
        self.sampling = sampling

    def complete(self, request: ChatRequest, *, on_delta: Callable[[Delta], None] | None = None,
                 cancel: CancelToken | None = None) -> ModelReply:
        merged = dict(self.sampling)
        merged.update(request.sampling)
        req = dataclasses.replace(request, sampling=merged)
        return self.client.chat(self.model, req, on_delta=on_delta, cancel=cancel)

    def close(self) -> None:
        self.client.close()


def open_provider(config: ProviderConfig, *, catalog: Catalog | None = None, model: str | None = None,
                  sampling: Mapping[str, Any] | None = None, check_model: bool = False,
                  transport: Any = None, replica: int | None = None) -> OpenAIProvider:
    """Build a provider, refusing anything that would be silently wrong.

    ``sampling`` are per-run values (e.g. from ``--temperature``) layered over
    the config's ``params``; both must be declared.  ``check_model`` asks the
    server's ``/v1/models`` whether the model is served (one request).
    ``replica`` is the base URL tried first (default: a random one, which
    spreads sessions over the replicas).  The API key and CA bundle are read
    here, so a missing one is refused before the first request.
    """
    if config.api not in SUPPORTED_APIS:  # also refused by validation; kept for constructed configs
        raise ProviderConfigError(f"provider {config.name!r}: api {config.api!r} is not supported")
    honoured = None
    if config.catalog_entry is not None:
        if catalog is None:
            raise ProviderConfigError(
                f"provider {config.name!r} names catalog entry {config.catalog_entry!r} but no catalog is loaded")
        honoured = catalog.get(config.catalog_entry).sampling
    values = dict(config.params)
    values.update(sampling or {})
    checked = check_sampling(config.name, config.sampling, values, honoured=honoured,
                             where="params" if not sampling else "params or the request")
    owner = f"provider {config.name!r}"
    tls = tls_context(owner, config.ca_bundle)
    api_key = read_api_key(owner, config.api_key_file, config.api_key_env)
    client = OpenAIClient(config.base_urls, connect_timeout_s=config.connect_timeout_s,
                          read_timeout_s=config.read_timeout_s, deadline_s=config.deadline_s,
                          max_retries=config.max_retries, transport=transport, tls=tls,
                          api_key=api_key, start=replica, unix_socket=config.unix_socket)
    chosen = model or config.model
    if chosen is None or check_model:
        served = client.list_models()
        if chosen is None:
            if not served:
                raise ProviderConfigError(f"provider {config.name!r} serves no models")
            chosen = served[0]
        elif chosen not in served:
            client.close()
            raise ModelNotFound(
                f"provider {config.name!r} does not serve model {chosen!r}; it serves: "
                f"{', '.join(served) or '(nothing)'}. Pass one of those with --model.",
                status=404, server_message="")
    return OpenAIProvider(config, client, chosen, checked)
