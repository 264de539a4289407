"""A provider as the operator configures it (``custom_providers`` in config.json).

The shape is the specification's (``name``, ``api``, ``base_url``,
``sampling``) plus ``model`` (the served model name) and ``params`` (default
values for declared sampling parameters).  The ``api`` is named, never guessed
from the URL: a URL says where, not what protocol.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from models._errors import ProviderConfigError
from models._sampling import check_sampling

__all__ = ["SUPPORTED_APIS", "ProviderConfig"]

SUPPORTED_APIS: tuple[str, ...] = ("openai",)


class ProviderConfig(BaseModel):
    """One model endpoint (or several replicas of it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    api: str = Field(description="Wire protocol; 'openai' (OpenAI-compatible, as vLLM serves).")
    base_url: str | list[str] = Field(
        description="Base URL ending in /v1, or a list of replicas tried in turn.")
    sampling: list[str] = Field(
        default_factory=list, description="Sampling parameters the endpoint honours.")
    model: str | None = Field(default=None, description="Served model name; default: the first one /v1/models lists.")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Default values for declared sampling parameters.")
    catalog_entry: str | None = Field(
        default=None, description="Catalog entry behind this endpoint; its sampling list is what the server honours.")
    connect_timeout_s: float = Field(default=5.0, gt=0, le=600)
    read_timeout_s: float = Field(default=300.0, gt=0, le=3600,
                                  description="Longest silence allowed between streamed chunks.")
    deadline_s: float = Field(default=900.0, gt=0, le=86400,
                              description="Whole request, retries included.")
    max_retries: int = Field(default=3, ge=0, le=10, description="Retries of transient failures only.")
    ca_bundle: str | None = Field(
        default=None, max_length=4096,
        description="PEM file of the CA(s) that sign this https endpoint; only they are trusted.")
    api_key_file: str | None = Field(
        default=None, max_length=4096,
        description="File holding the API key sent as a Bearer token (never logged).")
    api_key_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="Environment variable holding the API key (never logged).")
    unix_socket: str | None = Field(
        default=None, max_length=107,
        description="Send every request through this Unix socket: the host's model relay "
        "(/run/abhed/model.sock on a site host, docs/model-service.md) or this user's own "
        "on-demand service (vLLM's --uds, docs/quickstart.md); base_url then only names the "
        "path (http://model-service/v1).")
    start_on_demand: bool = Field(
        default=False,
        description="When nothing answers, start `abhed serve` for catalog_entry on a socket only "
                    "this user can reach; it stops after serve.idle_stop_s unused (docs/quickstart.md).")

    @field_validator("api")
    @classmethod
    def _known_api(cls, v: str) -> str:
        if v not in SUPPORTED_APIS:
            raise ValueError(
                f"api {v!r} is not supported; use one of: {', '.join(SUPPORTED_APIS)} "
                "(an OpenAI-compatible server such as vLLM is 'openai')")
        return v

    @field_validator("base_url")
    @classmethod
    def _urls(cls, v: str | list[str]) -> str | list[str]:
        urls = [v] if isinstance(v, str) else v
        if not urls:
            raise ValueError("base_url needs at least one URL")
        if len(urls) > 32:
            raise ValueError("base_url lists more than 32 replicas")
        for u in urls:
            parts = urlsplit(u)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"base_url {u!r} must be an http:// or https:// URL with a host")
            if parts.query or parts.fragment or parts.username or parts.password:
                raise ValueError(f"base_url {u!r} must not carry a query, fragment or credentials")
        return v

    router: bool = Field(
        default=False, description="base_url is the site's one endpoint with the vLLM router "
        "behind it (docs/providers.md, Scale): the router balances, so a list of replicas "
        "here is refused.")

    @model_validator(mode="after")
    def _one_balancer(self) -> ProviderConfig:
        if self.router and len(self.base_urls) > 1:
            raise ValueError("router is true but base_url lists several replicas: one mechanism "
                             "balances, and it is the router; give its one URL (the model "
                             "service's front) and list the replicas in serve.router.replicas")
        return self

    @model_validator(mode="after")
    def _one_key_source(self) -> ProviderConfig:
        if self.api_key_file is not None and self.api_key_env is not None:
            raise ValueError("set api_key_file or api_key_env, not both")
        return self

    @model_validator(mode="after")
    def _socket_and_on_demand(self) -> ProviderConfig:
        if self.start_on_demand and self.catalog_entry is None:
            raise ValueError("start_on_demand needs catalog_entry: the catalog entry to serve")
        if self.unix_socket is None:
            return self
        if not self.unix_socket.startswith("/"):
            raise ValueError(f"unix_socket {self.unix_socket!r} must be an absolute path")
        if len(self.base_urls) != 1 or not self.base_urls[0].startswith("http://"):
            raise ValueError("with unix_socket, base_url is one http:// URL naming the path "
                             "(the socket's server holds any TLS and credential)")
        if self.api_key_file is not None or self.api_key_env is not None:
            raise ValueError("with unix_socket, the socket's owner is the credential "
                             "(the relay, or this user's own service): set no api key")
        return self

    @model_validator(mode="after")
    def _sampling_declared(self) -> ProviderConfig:
        try:
            check_sampling(self.name, self.sampling, self.params)
        except ProviderConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def base_urls(self) -> list[str]:
        urls = [self.base_url] if isinstance(self.base_url, str) else list(self.base_url)
        return [u.rstrip("/") for u in urls]
