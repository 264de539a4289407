"""An OpenAI-compatible chat client on httpx: streaming, retries, typed errors.

Retries are for a model host that went away before any token came back:
connection refused, a connect or pool timeout (nothing was sent), a connection
reset or closed before the reply or before its first token, and 502/503/504
from the router, a proxy or a replica that is starting.  A chat request that
returned nothing has changed nothing, so sending it again is safe.  Once a
token has come back the engineer has seen it: a broken stream is then not
retried but raised as ``ModelStreamLost`` (the agent ends the turn with
``model_stream_lost``).  A server that accepted the request and then went
silent is not retried either (it may be working).  Every retry is named in
the reply's (or the error's) ``retries``, for the event log.  Everything else
is raised at once with the server's own message.  One deadline covers the whole
call, retries and backoff included.  ``trust_env=False``: proxy variables in
the environment cannot route requests anywhere but the configured URLs (the
CA trust is chosen explicitly instead: see ``models._credentials``).
"""

from __future__ import annotations

import dataclasses
import json
import random
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from models._chunks import StreamAssembler, StreamErrorReported, reply_from_message
from models._credentials import ApiKey
from models._errors import (
    ModelNotFound,
    ModelStreamLost,
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderUnavailable,
    RequestCancelled,
)
from models._request_log import REQUEST_HEADER, SESSION_HEADER
from models._types import CancelToken, ChatRequest, Delta, ModelReply

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIClient"]

_TRANSIENT_STATUS = frozenset({502, 503, 504})
_MAX_ERROR_BODY = 64 * 1024
_MAX_LINE = 8 * 1024 * 1024


def _router_lost_replica(resp: httpx.Response) -> bool:
    """vllm-router answers 500 ``Request failed: error sending request for url (...)`` when
    the replica it picked does not answer (stopped, restarting) before its health check
    has noticed: nothing reached a model, so it is retried like a refused connection
    (found by tests/site/test_failover.py, at a session's first request)."""
    import httpx

    try:
        return b"error sending request for url" in resp.read()[:4096]
    except (httpx.HTTPError, httpx.StreamError):
        return False


def server_message(status: int, body: bytes) -> str:
    """The server's own words from an error body (OpenAI, vLLM or FastAPI shapes)."""
    text = body[:_MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:2000] or f"HTTP {status}"
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:2000]
        for key in ("message", "detail", "error"):
            if isinstance(data.get(key), str):
                return str(data[key])[:2000]
        if isinstance(data.get("detail"), list):
            return json.dumps(data["detail"])[:2000]
    return text.strip()[:2000]


class _BeforeFirstToken(ProviderProtocolError):
    """The stream broke before any token came back: safe to send again (internal)."""


def _broken(resp: httpx.Response, asm: StreamAssembler, how: str) -> ProviderProtocolError:
    if not asm.text and not asm.calls:
        return _BeforeFirstToken(f"{resp.request.url}: the stream {how} before the first token")
    return ModelStreamLost(
        f"the stream from {resp.request.url} {how} after {len(asm.text)} chunks had come back; "
        "the model host died mid-reply (a crash or a restart). The turn ends here (model_stream_lost); check "
        "the host's log, then send the prompt again.")


class OpenAIClient:
    """Talks to one or more replicas of one OpenAI-compatible server."""

    def __init__(self, base_urls: list[str], *, connect_timeout_s: float = 5.0,
                 read_timeout_s: float = 300.0, deadline_s: float = 900.0, max_retries: int = 3,
                 backoff_s: float = 0.2, transport: httpx.BaseTransport | None = None,
                 tls: ssl.SSLContext | None = None, api_key: ApiKey | None = None,
                 start: int | None = None, unix_socket: str | None = None) -> None:
        """``start`` is the replica tried first; default: a random one, so sessions
        started against the same list spread over its servers.  ``tls`` replaces the
        public roots (a site CA); ``api_key`` is sent as a Bearer token; ``unix_socket``
        carries every request over that socket (the URL's host is then only a label)."""
        if not base_urls:
            raise ValueError("at least one base URL is needed")
        import httpx

        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.deadline_s = deadline_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._next = (random.randrange(len(self.base_urls)) if start is None
                      else start % len(self.base_urls))
        self.has_api_key = api_key is not None
        headers = {"user-agent": "abhed", **(api_key.header() if api_key is not None else {})}
        # No keep-alive: every request gets its own connection, whose socket an
        # interrupt can shut down even while a read is blocked on it.
        verify: ssl.SSLContext | bool = tls if tls is not None else True
        if transport is None and unix_socket is not None:
            transport = httpx.HTTPTransport(uds=unix_socket, verify=verify)
        self._http = httpx.Client(transport=transport, trust_env=False, follow_redirects=False,
                                  headers=headers, verify=verify,
                                  limits=httpx.Limits(max_keepalive_connections=0))

    def close(self) -> None:
        self._http.close()

    # -- public calls -------------------------------------------------------
    def list_models(self) -> list[str]:
        with self._request("GET", "/models", None, None) as resp:
            body = self._json(resp)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ProviderProtocolError(f"/models did not return a list: {str(body)[:200]}")
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]

    def chat(self, model: str, request: ChatRequest, *,
             on_delta: Callable[[Delta], None] | None = None,
             cancel: CancelToken | None = None) -> ModelReply:
        """One chat completion; ``request.sampling`` is sent as given (check it first)."""
        body: dict[str, Any] = {"model": model, "messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        body.update(request.sampling)
        body.update(request.extra_body)
        body["stream"] = request.stream
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        ids = {name: value for name, value in ((SESSION_HEADER, request.session_id),
                                               (REQUEST_HEADER, request.request_id)) if value}
        retries: list[str] = []
        deadline = time.monotonic() + self.deadline_s
        try:
            while True:
                with self._request("POST", "/chat/completions", body, cancel, ids,
                                   retries=retries, deadline=deadline) as resp:
                    if not request.stream:
                        reply = reply_from_message(self._json(resp, cancel))
                    else:
                        try:
                            reply = self._stream(resp, on_delta, cancel)
                        except _BeforeFirstToken as exc:
                            if len(retries) >= self._budget():
                                raise ProviderProtocolError(
                                    f"{exc}; the server may have died mid-reply. Not retried "
                                    f"again after {len(retries) + 1} attempts: check its log."
                                ) from None
                            retries.append(str(exc))
                            continue  # the next attempt backs off and counts against the budget
                    return dataclasses.replace(reply, retries=tuple(retries))
        except ProviderError as exc:
            exc.retries = tuple(retries)
            raise

    # -- plumbing -----------------------------------------------------------
    def _json(self, resp: httpx.Response, cancel: CancelToken | None = None) -> Any:
        import httpx

        try:
            return json.loads(resp.read())
        except ValueError:
            raise ProviderProtocolError(f"{resp.request.url} did not return JSON") from None
        except (httpx.HTTPError, httpx.StreamError) as exc:
            if cancel is not None and cancel.cancelled:  # the cancel closed it under us
                raise RequestCancelled(f"request cancelled: {cancel.reason}") from None
            raise ProviderProtocolError(
                f"the reply from {resp.request.url} broke off ({type(exc).__name__}: {exc}); "
                "the server may have died mid-reply. Check its log, then retry.") from None

    def _stream(self, resp: httpx.Response, on_delta: Callable[[Delta], None] | None,
                cancel: CancelToken | None) -> ModelReply:
        """The assembled reply; a stream that breaks raises :class:`_BeforeFirstToken`
        (retried) when nothing had come back yet, :class:`ModelStreamLost` otherwise."""
        import httpx

        asm = StreamAssembler(on_delta)
        done = False
        try:
            for line in resp.iter_lines():
                if cancel is not None and cancel.cancelled:
                    raise RequestCancelled(f"request cancelled: {cancel.reason}")
                if len(line) > _MAX_LINE:
                    raise ProviderProtocolError("a stream line exceeds 8 MiB; refusing it")
                if not line.startswith("data:"):
                    continue  # comments, event:, id:, retry: and blank separators
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise ProviderProtocolError(f"stream chunk is not JSON: {data[:200]!r}") from None
                try:
                    asm.feed(chunk)
                except StreamErrorReported as exc:
                    raise _broken(resp, asm, f"was ended by the server ({exc})") from None
        except (httpx.HTTPError, httpx.StreamError) as exc:
            # StreamError (StreamClosed: an interrupt closed the response under us) is not
            # an HTTPError; uncaught it escaped the loop as a crash instead of "interrupted".
            if cancel is not None and cancel.cancelled:
                raise RequestCancelled(f"request cancelled: {cancel.reason}") from None
            if isinstance(exc, httpx.TimeoutException) and not (asm.text or asm.calls):
                raise ProviderProtocolError(
                    f"{resp.request.url} accepted the request but sent nothing back in time "
                    f"({type(exc).__name__}); the server may be overloaded. Not retried, since "
                    "it may be working on it.") from None
            raise _broken(resp, asm, f"broke ({type(exc).__name__}: {exc})") from None
        if cancel is not None and cancel.cancelled:
            raise RequestCancelled(f"request cancelled: {cancel.reason}")
        if not done and asm.finish_reason is None:
            raise _broken(resp, asm, "ended without finishing (no finish_reason, no [DONE])")
        return asm.reply()

    @contextmanager
    def _request(self, method: str, path: str, body: Any, cancel: CancelToken | None,
                 ids: dict[str, str] | None = None, *, retries: list[str] | None = None,
                 deadline: float | None = None) -> Iterator[httpx.Response]:
        """Send with retries over the replicas; every attempt carries the same ``ids``
        headers, so the model side records a retried turn under one request id.  Each
        retried attempt is appended to ``retries``, whose length is the attempts spent
        (a caller retrying a stream shares the budget and ``deadline``)."""
        import httpx

        deadline = deadline if deadline is not None else time.monotonic() + self.deadline_s
        retries = retries if retries is not None else []
        attempt = len(retries)
        last = retries[-1] if retries else ""
        if attempt:
            self._pause(attempt, deadline, cancel, last)
        payload = None if body is None else json.dumps(body).encode()
        while True:
            if cancel is not None and cancel.cancelled:
                raise RequestCancelled(f"request cancelled: {cancel.reason}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProviderUnavailable(
                    f"no answer within the {self.deadline_s:g} s deadline ({last or 'no attempt'}); "
                    "check that the model server is running (`abhed serve`) and reachable.")
            base = self.base_urls[(self._next + attempt) % len(self.base_urls)]
            url = base + path
            timeout = httpx.Timeout(connect=min(self.connect_timeout_s, remaining),
                                    read=min(self.read_timeout_s, remaining),
                                    write=min(30.0, remaining), pool=min(5.0, remaining))
            req = self._http.build_request(
                method, url, content=payload, timeout=timeout,
                headers={**({"content-type": "application/json"} if payload is not None else {}),
                         **(ids or {})})
            transient = False
            unhook = self._hook_cancel(req, cancel)
            try:
                resp = self._http.send(req, stream=True)
            except httpx.HTTPError as exc:
                unhook()
                if cancel is not None and cancel.cancelled:
                    # The cancel shut the socket while the server had sent nothing yet (a
                    # request queued behind a full KV cache): that is the caller's stop,
                    # not an unavailable server.
                    raise RequestCancelled(f"request cancelled: {cancel.reason}") from None
                if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
                    transient, last = True, f"{url}: {type(exc).__name__}: {exc}"
                elif isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
                    # Closed or reset before any reply: the host went away (a crash, a restart).
                    transient, last = True, f"{url}: {type(exc).__name__}: {exc} (before the reply)"
                elif isinstance(exc, httpx.TimeoutException):
                    raise ProviderUnavailable(
                        f"{url} accepted the request but sent nothing back in time "
                        f"({type(exc).__name__}); the server may be overloaded. Not retried, "
                        "since it may be working on it.") from None
                else:
                    raise ProviderUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
            else:
                unregister = cancel.on_cancel(resp.close) if cancel is not None else (lambda: None)
                try:
                    if resp.status_code in _TRANSIENT_STATUS:
                        last = f"{url}: HTTP {resp.status_code}"
                        transient = True
                    elif resp.status_code == 500 and _router_lost_replica(resp):
                        last = (f"{url}: HTTP 500 from the router: the model host it picked did "
                                "not answer (stopped or restarting)")
                        transient = True
                    elif resp.status_code >= 400:
                        self._raise_status(url, resp)
                    else:
                        self._next = (self._next + attempt) % len(self.base_urls)
                        yield resp
                        return
                finally:
                    unregister()
                    unhook()
                    resp.close()
            unhook()
            assert transient
            retries.append(last)
            attempt += 1
            self._pause(attempt, deadline, cancel, last)

    def _budget(self) -> int:
        """Retries one call may spend, over all its replicas."""
        return min(self.max_retries * max(1, len(self.base_urls)), 50)

    def _pause(self, attempt: int, deadline: float, cancel: CancelToken | None,
               last: str) -> None:
        """Refuse once the retries are spent, else back off before attempt ``attempt + 1``."""
        if attempt > self._budget():
            raise ProviderUnavailable(
                f"model server unavailable after {attempt} attempts ({last}); start it with "
                "`abhed serve` or check base_url in the provider config.")
        pause = min(self.backoff_s * (2 ** min(attempt - 1, 6)), 5.0) * (0.5 + random.random() / 2)
        pause = min(pause, max(0.0, deadline - time.monotonic()))
        if cancel is not None:
            if cancel.wait(pause):
                raise RequestCancelled(f"request cancelled: {cancel.reason}")
        else:
            time.sleep(pause)

    @staticmethod
    def _hook_cancel(req: httpx.Request, cancel: CancelToken | None) -> Callable[[], None]:
        """On cancel, shut the request's socket down, unblocking a read in another thread."""
        if cancel is None:
            return lambda: None
        removers: list[Callable[[], None]] = []

        def trace(name: str, info: dict[str, Any]) -> None:
            if name.endswith(("connect_tcp.complete", "connect_unix_socket.complete")):
                stream = info.get("return_value")
                sock = stream.get_extra_info("socket") if stream is not None else None
                if isinstance(sock, socket.socket):
                    def shut(s: socket.socket = sock) -> None:
                        try:
                            s.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                    removers.append(cancel.on_cancel(shut))

        req.extensions["trace"] = trace

        def unhook() -> None:
            while removers:
                removers.pop()()
        return unhook

    def _raise_status(self, url: str, resp: httpx.Response) -> None:
        import httpx

        try:
            raw = resp.read()
        except httpx.HTTPError:
            raw = b""
        msg = server_message(resp.status_code, raw)
        status = resp.status_code
        lowered = msg.lower()
        if status == 404 and ("model" in lowered or "does not exist" in lowered):
            raise ModelNotFound(
                f"the server at {url} does not serve that model: {msg}. Use a name "
                "from its /v1/models list, or fix \"model\" in the provider config.",
                status=status, server_message=msg)
        hint = {400: "the request was refused as invalid; fix the value it names",
                401: ("the API key was refused; check api_key_file/api_key_env in the provider "
                      "config" if self.has_api_key else "the server wants an API key: set "
                      "api_key_file or api_key_env in the provider config (docs/providers.md)"),
                413: "the request is too large; shorten the conversation",
                422: "the request was refused as invalid; fix the value it names",
                429: "the server is rate-limiting; wait and retry"}.get(
                    status, "see the server's log for details")
        raise ProviderHTTPError(f"HTTP {status} from {url}: {msg} ({hint})", status=status,
                                server_message=msg)
