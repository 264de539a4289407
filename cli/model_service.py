"""``abhed model-relay`` and ``abhed model-front``: the two ends of the site's model service.

Both are run by the installer's service definitions, as root (docs/model-service.md):
the relay on every host where engineers work, the front on every model host.
Each prints one ``listening on ...`` line on stdout once it accepts
connections, then serves until SIGTERM or Ctrl-C.  Exit 0 on a clean stop, 1
when it cannot start (the message names the file or port, or the model host that
does not serve what the site declared), 2 on a usage error.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Protocol

import click

_FILE = click.Path(dir_okay=False, path_type=Path)


class _Server(Protocol):
    def start(self) -> object: ...
    def shutdown(self) -> None: ...


def _serve(server: _Server, line: str) -> None:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        server.start()
        click.echo(line)
        sys.stdout.flush()
        stop.wait()
    finally:
        server.shutdown()
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


@click.command("model-relay")
@click.option("--socket", "socket_path", type=_FILE, default=Path("/run/abhed/model.sock"),
              show_default=True, help="The Unix socket engineers' abhed connects to.")
@click.option("--upstream", "upstreams", multiple=True, required=True, metavar="URL",
              help="The model service front, https://HOST:PORT (repeat: tried in turn).")
@click.option("--ca", type=_FILE, required=True, help="The site CA certificate (PEM).")
@click.option("--credential", type=_FILE, required=True,
              help="This host's key and certificate (PEM, root-only).")
@click.option("--engineers", type=_FILE, default=None,
              help="The enrolled engineers (abhed-installer engineer enroll); required "
              "unless --gate.")
@click.option("--gate", is_flag=True,
              help="The installer's health gate's relay: admits only its own uid, recorded "
              "as the gate, never as an engineer (no --engineers).")
@click.option("--read-timeout-s", type=click.FloatRange(1, 3600), default=600.0,
              show_default=True, help="Longest silence from the model service.")
def model_relay(socket_path: Path, upstreams: tuple[str, ...], ca: Path, credential: Path,
                engineers: Path | None, gate: bool, read_timeout_s: float) -> None:
    """Relay enrolled engineers' model requests to the site's model service, naming each."""
    from models import ModelsError
    from models.service import ModelRelay, RelaySettings

    if (engineers is None) != gate:
        raise click.UsageError("give --engineers (the host's relay) or --gate (the "
                               "installer's health gate), one of the two")
    try:
        relay = ModelRelay(RelaySettings(socket_path=socket_path, upstreams=upstreams, ca=ca,
                                         credential=credential, enrolment=engineers,
                                         read_timeout_s=read_timeout_s, gate=gate))
    except (ModelsError, OSError, ValueError) as exc:
        click.echo(f"abhed model-relay: {exc}", err=True)
        sys.exit(1)
    _serve(relay, f"listening on {socket_path}")


@click.command("model-front")
@click.option("--host", "listen_host", default="0.0.0.0", show_default=True,
              help="The address to listen on (the site network's).")
@click.option("--port", "listen_port", type=click.IntRange(0, 65535), default=8443,
              show_default=True)
@click.option("--ca", type=_FILE, required=True, help="The site CA certificate (PEM).")
@click.option("--credential", type=_FILE, required=True,
              help="This model host's key and certificate (PEM, root-only).")
@click.option("--crl", type=_FILE, required=True,
              help="The site CA's revocation list (abhed-installer credential crl).")
@click.option("--upstream", default="http://127.0.0.1:8000", show_default=True,
              help="vLLM, on loopback.")
@click.option("--api-key-file", type=_FILE, default=None,
              help="The key vLLM demands (VLLM_API_KEY), root-only.")
@click.option("--record", type=_FILE, required=True, help="The request record (SQLite).")
@click.option("--catalog", type=_FILE, default=None,
              help="The catalog whose entry the model hosts must serve (served name, "
              "max_model_len, vLLM version), checked before the front takes traffic.")
@click.option("--model", "model_name", default=None, help="That catalog's entry (default: the first).")
@click.option("--replica", "replicas", multiple=True, metavar="URL",
              help="A model host's vLLM behind the router (--upstream), checked against "
              "--catalog (repeat for each).")
def model_front(listen_host: str, listen_port: int, ca: Path, credential: Path, crl: Path,
                upstream: str, api_key_file: Path | None, record: Path, catalog: Path | None,
                model_name: str | None, replicas: tuple[str, ...]) -> None:
    """Serve the site's model requests: authenticate each host, record every request."""
    from models import ModelsError, load_catalog
    from models.service import FrontSettings, ModelFront

    if replicas and catalog is None:
        raise click.UsageError("--replica needs --catalog: what each replica must serve")
    try:
        declared = (load_catalog(catalog).get(model_name).host_declaration()
                    if catalog is not None else None)
        front = ModelFront(FrontSettings(listen_host=listen_host, listen_port=listen_port,
                                         ca=ca, credential=credential, crl=crl,
                                         upstream=upstream, record=record,
                                         api_key_file=api_key_file, declared=declared,
                                         replicas=replicas))
    except (ModelsError, OSError, ValueError) as exc:
        click.echo(f"abhed model-front: {exc}", err=True)
        sys.exit(1)
    _serve(front, f"listening on {listen_host}:{front.port}")
