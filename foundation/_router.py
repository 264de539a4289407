"""The vLLM project's router (``vllm-router``) over several model hosts: its command and
what a replica's URL may be.

One definition for the two doors that start it: ``abhed serve --dry-run`` prints it for
``serve.router`` (``models._scale``) and the installer writes it into
``abhed-model-router.service`` (``installer._services``), from the site spec's
``[roles.router]`` (``bundle._roles``).  The installer may not import models and models
may not import the installer, so it lives here, where both stand.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import SplitResult, urlsplit

__all__ = ["ROUTER_MODULE", "ROUTER_PORT", "replica_root", "router_argv"]

ROUTER_MODULE = "vllm_router.launch_router"
ROUTER_PORT = 8100
"""Where the router listens by default: loopback, only the model-service front reaches it."""


def service_url(url: object, what: str, example: str) -> SplitResult:
    """``url`` split, when it is an http(s) URL with a host and no credentials, query or
    fragment: the one rule for every URL a site names for its model service (the agent
    hosts' model endpoints, the router's replicas).  ValueError naming ``what`` otherwise,
    with ``example`` as the form to give."""
    if not isinstance(url, str) or len(url) > 2000:
        raise ValueError(f"{what} {str(url)[:80]!r} is not a URL")
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise ValueError(f"{what} {url!r} has a bad port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} {url!r} must be an http:// or https:// URL with a host "
                         f"(e.g. {example})")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{what} {url!r} must not carry a query, fragment or credentials")
    return parts


def replica_root(url: object) -> str:
    """A replica's vLLM root URL (``http://10.0.0.5:8000``): a :func:`service_url` with no
    path but an optional ``/v1`` (dropped).  ValueError naming the URL otherwise."""
    parts = service_url(url, "replica", "vLLM's root, http://10.0.0.5:8000")
    if parts.path.rstrip("/") not in ("", "/v1"):
        raise ValueError(f"replica {url!r}: give vLLM's root URL, no path")
    return f"{parts.scheme}://{parts.netloc}"


def router_argv(python: str, replicas: Sequence[str], *, host: str = "127.0.0.1",
                port: int = ROUTER_PORT, policy: str = "cache_aware",
                health_check_interval_s: int = 5, startup_timeout_s: int = 900) -> list[str]:
    """The router's command line over ``replicas`` (vLLM root URLs); flags from
    vllm_router's router_args.py, 0.1.17.  Its health check is vLLM's ``/health`` only:
    whether a host serves what the site declared is checked once, when its service starts
    (docs/model-service.md), not on every probe."""
    return [python, "-m", ROUTER_MODULE, "--host", host, "--port", str(port),
            "--policy", policy, "--worker-urls", *replicas,
            "--health-check-endpoint", "/health",
            "--health-check-interval-secs", str(health_check_interval_s),
            "--worker-startup-timeout-secs", str(startup_timeout_s)]
