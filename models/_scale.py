"""How one model is spread over GPUs and hosts, and the router in front of its replicas.

One mechanism each, all vLLM's own (docs/providers.md, "Scale"):

* within a host: tensor parallel (one copy split over GPUs), data parallel (several
  copies, vLLM balancing between them);
* one model too big for a host: pipeline stages across hosts on Ray;
* several model hosts behind one endpoint: the vLLM project's router (``vllm-router``,
  ``python -m vllm_router.launch_router``) over the replicas, the model-service front
  in front of it.  The client then talks to one URL: its own rotation is refused.

The fit rule lives here, so the catalog entry, the site spec at gather and ``abhed
serve`` refuse the same layouts with the same words.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from foundation import ROUTER_MODULE, ROUTER_PORT, replica_root, router_argv

__all__ = ["ROUTER_MODULE", "RouterSettings", "check_parallel_fit", "router_command"]

def check_parallel_fit(*, tensor: int, pipeline: int, data: int, gpus_per_host: int | None,
                       hosts: int, backend: str | None) -> None:
    """ValueError naming the fields when the parallel sizes do not fit the declared GPUs.

    vLLM needs tensor x pipeline x data GPUs in all.  Tensor parallel stays inside a host
    (its all-reduce on every layer wants NVLink, not the network); only pipeline stages
    cross hosts, and only on Ray.  ``gpus_per_host`` None: nothing declared, nothing checked
    beyond the Ray rule.
    """
    need = tensor * pipeline * data
    if hosts > 1 and backend != "ray":
        raise ValueError(f"hosts = {hosts} needs distributed_executor_backend = \"ray\" (vLLM "
                         "spans hosts only on Ray); got "
                         f"{backend if backend is not None else 'none'}")
    if gpus_per_host is None:
        return
    if tensor > gpus_per_host:
        raise ValueError(f"tensor_parallel_size {tensor} is more than gpus_per_host "
                         f"{gpus_per_host}: tensor parallel stays within one host; use "
                         "pipeline_parallel_size across hosts instead")
    have = gpus_per_host * hosts
    if need > have:
        raise ValueError(f"tensor_parallel_size {tensor} x pipeline_parallel_size {pipeline} x "
                         f"data_parallel_size {data} = {need} GPUs, but gpus_per_host "
                         f"{gpus_per_host} x hosts {hosts} = {have}: lower a size or declare "
                         "more GPUs")


class RouterSettings(BaseModel):
    """The vLLM router over a model's replicas (config ``serve.router``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    replicas: tuple[str, ...] = Field(min_length=1, max_length=64,
                                      description="vLLM replicas' root URLs (http://host:port).")
    policy: Literal["round_robin", "power_of_two", "cache_aware"] = Field(
        default="cache_aware", description="How the router picks a replica; cache_aware keeps "
        "a session on the replica holding its prefix cache.")
    host: str = "127.0.0.1"
    port: int = Field(default=ROUTER_PORT, ge=1, le=65535)
    python: str | None = Field(default=None, description="Python with vllm-router installed.")
    health_check_interval_s: int = Field(default=5, ge=1, le=3600)
    startup_timeout_s: int = Field(default=900, ge=1, le=7200)

    @field_validator("replicas")
    @classmethod
    def _urls(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        roots = tuple(replica_root(u) for u in v)
        if len(set(roots)) != len(roots):
            raise ValueError("a replica is listed twice")
        return roots

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"


def router_command(settings: RouterSettings, python: str) -> list[str]:
    """The router's command line: ``foundation.router_argv``, the installer's too."""
    return router_argv(python, settings.replicas, host=settings.host, port=settings.port,
                       policy=settings.policy,
                       health_check_interval_s=settings.health_check_interval_s,
                       startup_timeout_s=settings.startup_timeout_s)
