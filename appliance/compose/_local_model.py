"""The one place a door reaches a provider marked ``start_on_demand``.

Such a provider is this user's own local model service (docs/quickstart.md):
when its socket does not answer, ``abhed serve --socket ... --stop-when-unused``
is started for the provider's catalog entry and waited for, and this process
holds the service for as long as its session is open, so the service stops only
once no ``abhed`` uses it (the locks are :class:`models.LocalService`'s).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from appliance._home import abhed_home
from appliance.assembly import Config
from models import LocalService, OpenAIProvider, ProviderConfig, ServiceHold, open_provider

__all__ = ["SERVE_MODULE", "keeper_command", "local_service", "open_reached", "reach_provider"]

#: The module that runs the ``abhed`` command; the keeper is ``abhed serve`` run through it
#: (a process started by name, not an import: the composition does not import its doors).
SERVE_MODULE = "cli"


def local_service(pconf: ProviderConfig) -> LocalService:
    """Where the on-demand service of ``pconf`` keeps its socket, locks and log."""
    name = pconf.catalog_entry or pconf.name
    home = abhed_home()
    return LocalService(home / "run", name, home / "logs" / f"vllm-{name}.log")


def keeper_command(config: Config, pconf: ProviderConfig) -> list[str]:
    """``abhed serve`` for the provider's entry on its socket, stopping when unused."""
    svc = local_service(pconf)
    argv = [sys.executable, "-m", SERVE_MODULE, "serve", "--model", svc.name,
            "--socket", str(svc.socket), "--stop-when-unused"]
    if config.user_file is not None:
        argv += ["--config", str(config.user_file)]
    return argv


def reach_provider(config: Config, pconf: ProviderConfig, *,
                   say: Callable[[str], None] | None = None
                   ) -> tuple[ProviderConfig, ServiceHold | None]:
    """``pconf`` ready to be opened, and the hold to release when the session closes.

    A provider not started on demand comes back as it is, with no hold.

    Raises:
        models.ServeError: the service could not be started or did not answer in time
            (the message names its log).
    """
    if not pconf.start_on_demand:
        return pconf, None
    svc = local_service(pconf)
    hold = svc.hold()
    try:
        svc.ensure(keeper_command(config, pconf), timeout_s=config.serve.startup_timeout_s,
                   env=dict(os.environ, ABHED_HOME=str(abhed_home())), say=say)
    except BaseException:
        hold.release()
        raise
    return pconf.model_copy(update={"unix_socket": str(svc.socket)}), hold


def open_reached(config: Config, pconf: ProviderConfig, *, say: Callable[[str], None] | None = None,
                 **open_args: Any) -> tuple[ProviderConfig, OpenAIProvider, Callable[[], None]]:
    """:func:`reach_provider`, then ``models.open_provider(pconf, **open_args)``: the reached
    settings, the provider, and the one call that closes it and then releases the service
    hold (nothing is left held when the provider cannot be opened).

    Raises:
        models.ServeError: as :func:`reach_provider`.
        models.ModelsError: as ``open_provider``.
    """
    pconf, hold = reach_provider(config, pconf, say=say)
    try:
        provider = open_provider(pconf, **open_args)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    if hold is None:
        return pconf, provider, provider.close

    def close_and_release() -> None:
        try:
            provider.close()
        finally:
            hold.release()
    return pconf, provider, close_and_release
