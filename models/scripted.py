"""A scripted OpenAI-compatible server: real HTTP on 127.0.0.1, replies from a script.

Shipped in the package (as httpx ships ``MockTransport``) so the loop, the CLI,
rpc clients and the TUI can be tested in milliseconds against a real socket,
with every awkward server behaviour on demand: tool-call deltas split at any
byte, HTTP errors with a message, a stream that dies half-way, a server that
goes silent.  It is a test double beside the real vLLM, never instead of it.
A public module that ``models/__init__`` does not import (``http.server`` and
``argparse`` are no part of an agent's start-up): import it as ``models.scripted``.

Run it standalone::

    python -m models.scripted --script steps.json [--port 0]

It prints ``listening on http://127.0.0.1:PORT/v1`` and serves until killed.
"""

from __future__ import annotations

import argparse
import json
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from foundation import FoundationError, parse_json_list, read_regular
from models._http11 import ThreadedService
from models._request_log import REQUEST_HEADER, SESSION_HEADER

__all__ = ["ScriptStep", "ScriptedCall", "ScriptedServer", "read_script", "serve_until_interrupted"]

_MAX_BODY = 64 * 1024 * 1024
_MAX_SCRIPT_BYTES = 16 << 20


class ScriptedCall(BaseModel):
    """A tool call the server will return; ``arguments`` as an object, or raw text (may be broken)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def raw_arguments(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


class ScriptStep(BaseModel):
    """One reply.  Defaults give a plain streamed text answer."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    finish_reason: str | None = None
    chunk_chars: int = Field(default=8, ge=1, description="Split text and arguments into pieces this long.")
    delay_s: float = Field(default=0.0, ge=0, le=60, description="Pause before each chunk.")
    status: int = Field(default=200, ge=200, le=599)
    error: str = Field(default="", description="Message of an error reply (status >= 400).")
    die_after_chunks: int | None = Field(default=None, ge=0,
                                         description="Drop the connection after this many chunks.")
    hang: bool = Field(default=False, description=(
        "Streamed: send headers, then nothing until the client leaves; not streamed: send "
        "nothing at all (a request queued behind a full KV cache), until the server stops."))
    completion_tokens: int | None = None


def _split(text: str, n: int) -> list[str]:
    return [text[i:i + n] for i in range(0, len(text), n)] or []


class ScriptedServer(ThreadedService):
    """Serves ``steps`` in order (or asks ``responder``), recording each request body.

    Use as a context manager; ``base_url`` is ready once it returns.
    """

    _thread_name = "scripted-openai"
    _poll_s = 0.05
    _join_s = 5.0

    def __init__(self, steps: Sequence[ScriptStep | dict[str, Any]] = (), *,
                 responder: Callable[[dict[str, Any]], ScriptStep] | None = None,
                 model: str = "scripted", port: int = 0, api_key: str | None = None,
                 tls: ssl.SSLContext | None = None, max_model_len: int = 8192,
                 vllm_version: str = "0.0.0-scripted") -> None:
        """``api_key``: refuse /v1 requests without ``Authorization: Bearer KEY`` (401), as
        vLLM does with ``VLLM_API_KEY``; ``tls``: serve https with this server context."""
        self.steps = [s if isinstance(s, ScriptStep) else ScriptStep.model_validate(s) for s in steps]
        self.responder = responder
        self.model = model
        # What vLLM reports on /v1/models and /version (the host check reads both).
        self.max_model_len = max_model_len
        self.vllm_version = vllm_version
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.api_key = api_key
        self.scheme = "https" if tls is not None else "http"
        self.authorizations: list[str | None] = []
        # (X-Abhed-Session, X-Abhed-Request) of every chat request, retries included.
        self.ids: list[tuple[str | None, str | None]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._httpd.daemon_threads = True
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._server = self._httpd

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    def add(self, *steps: ScriptStep | dict[str, Any]) -> None:
        with self._lock:
            self.steps.extend(s if isinstance(s, ScriptStep) else ScriptStep.model_validate(s) for s in steps)

    def stop(self) -> None:
        """:meth:`shutdown`, by the name the tests and the probe use."""
        self.shutdown()

    def _stopping(self) -> None:
        self._stop.set()

    def _next_step(self, body: dict[str, Any]) -> ScriptStep:
        with self._lock:
            self.requests.append(body)
            if self.responder is not None:
                return self.responder(body)
            if not self.steps:
                return ScriptStep(status=500, error="scripted server: the script has no more steps")
            return self.steps.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refused(self) -> bool:
                """vLLM's --api-key check: every /v1 route, not /health."""
                got = self.headers.get("authorization")
                with server._lock:
                    server.authorizations.append(got)
                if server.api_key is None or not self.path.startswith("/v1"):
                    return False
                if got == f"Bearer {server.api_key}":
                    return False
                self.close_connection = True  # the unread body must not be taken as a request
                self._json(401, {"error": "Unauthorized"})
                return True

            def do_GET(self) -> None:
                if self._refused():
                    return
                if self.path in ("/health", "/v1/health"):
                    self._json(200, {})
                elif self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{
                        "id": server.model, "object": "model",
                        "max_model_len": server.max_model_len}]})
                elif self.path == "/version":
                    self._json(200, {"version": server.vllm_version})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}", "code": 404}})

            def do_POST(self) -> None:
                with server._lock:
                    server.ids.append((self.headers.get(SESSION_HEADER),
                                       self.headers.get(REQUEST_HEADER)))
                if self._refused():
                    return
                if self.path != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no route {self.path}", "code": 404}})
                    return
                length = int(self.headers.get("content-length") or 0)
                if length > _MAX_BODY:
                    self._json(413, {"error": {"message": "request body too large", "code": 413}})
                    return
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    self._json(400, {"error": {"message": "body is not JSON", "code": 400}})
                    return
                if not isinstance(body, dict):
                    self._json(400, {"error": {"message": "body must be an object", "code": 400}})
                    return
                if body.get("model") != server.model:
                    self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                               "type": "NotFoundError", "code": 404}})
                    return
                step = server._next_step(body)
                if step.status >= 400:
                    self._json(step.status, {"error": {"message": step.error or "scripted error",
                                                       "type": "BadRequestError", "code": step.status}})
                elif body.get("stream"):
                    self._stream(step, body)
                elif step.hang:
                    server._stop.wait(600)
                else:
                    self._whole(step, body)

            def _usage(self, step: ScriptStep, body: dict[str, Any]) -> dict[str, int]:
                # As a real server counts: the messages and the tool schemas both fill the context.
                prompt = (len(json.dumps(body.get("messages", [])))
                          + len(json.dumps(body.get("tools") or []))) // 4
                done = step.completion_tokens
                if done is None:
                    done = (len(step.text) + sum(len(c.raw_arguments()) for c in step.tool_calls)) // 4 + 1
                return {"prompt_tokens": prompt, "completion_tokens": done,
                        "total_tokens": prompt + done}

            def _finish(self, step: ScriptStep) -> str:
                return step.finish_reason or ("tool_calls" if step.tool_calls else "stop")

            def _whole(self, step: ScriptStep, body: dict[str, Any]) -> None:
                calls = [{"id": c.id or f"call-{i}", "type": "function",
                          "function": {"name": c.name, "arguments": c.raw_arguments()}}
                         for i, c in enumerate(step.tool_calls)]
                msg: dict[str, Any] = {"role": "assistant", "content": step.text or None}
                if calls:
                    msg["tool_calls"] = calls
                self._json(200, {"id": "cmpl-scripted", "object": "chat.completion",
                                 "model": server.model, "usage": self._usage(step, body),
                                 "choices": [{"index": 0, "message": msg,
                                              "finish_reason": self._finish(step)}]})

            def _stream(self, step: ScriptStep, body: dict[str, Any]) -> None:
                chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
                chunks += [{"content": piece} for piece in _split(step.text, step.chunk_chars)]
                for i, c in enumerate(step.tool_calls):
                    chunks.append({"tool_calls": [{"index": i, "id": c.id or f"call-{i}", "type": "function",
                                                   "function": {"name": c.name, "arguments": ""}}]})
                    chunks += [{"tool_calls": [{"index": i, "function": {"arguments": piece}}]}
                               for piece in _split(c.raw_arguments(), step.chunk_chars)]
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                if step.hang:
                    self.wfile.flush()
                    server._stop.wait(600)
                    return

                def send(obj: Any) -> None:
                    self.wfile.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode())
                                     + b"\n\n")
                    self.wfile.flush()

                try:
                    for n, delta in enumerate(chunks):
                        if step.die_after_chunks is not None and n >= step.die_after_chunks:
                            self.close_connection = True
                            return
                        if step.delay_s:
                            if server._stop.wait(step.delay_s):
                                return
                        send({"id": "cmpl-scripted", "object": "chat.completion.chunk", "model": server.model,
                              "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                    send({"id": "cmpl-scripted", "object": "chat.completion.chunk", "model": server.model,
                          "choices": [{"index": 0, "delta": {}, "finish_reason": self._finish(step)}]})
                    send({"id": "cmpl-scripted", "object": "chat.completion.chunk", "model": server.model,
                          "choices": [], "usage": self._usage(step, body)})
                    send(b"[DONE]")
                except (BrokenPipeError, ConnectionResetError):
                    return

        return Handler


def _main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m models.scripted", description=__doc__.splitlines()[0])
    ap.add_argument("--script", type=Path, required=True, help="JSON list of steps (ScriptStep fields).")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", default="scripted")
    ns = ap.parse_args(argv)
    try:
        steps = read_script(ns.script)
    except FoundationError as exc:
        ap.error(str(exc))
    serve_until_interrupted(ScriptedServer(steps, model=ns.model, port=ns.port).start())


def read_script(path: Path) -> list[Any]:
    """The steps of a ``--script`` file (a JSON list of ScriptStep fields), read strictly
    (foundation's one reader: a duplicate key, a cut file or one over 16 MiB is refused).

    Raises:
        foundation.FoundationError: missing, unreadable, oversized or malformed, in its words.
    """
    return parse_json_list(read_regular(path, _MAX_SCRIPT_BYTES, "script"), what="script",
                           source=path, hint="Give a JSON list of steps (ScriptStep fields).")


def serve_until_interrupted(server: ScriptedServer) -> None:
    """Say where ``server`` listens, then serve until Ctrl-C (the ``python -m`` forms)."""
    print(f"listening on {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    _main()
