"""``abhed model-front``: the model service's door, which knows who asks and records it.

It listens on the model host's site address with TLS and requires a client
certificate from the site's CA (``models._site_tls``): another site's
certificate, an expired one, or none at all ends in the handshake; a revoked
one (the CA's signed revocation list) gets a 403.  The host is the
certificate's subject name.  The engineer is the ``X-Abhed-Engineer`` header,
believed because only a host's relay, which sets it from the kernel's peer
credentials and drops any the caller sent, holds a certificate to get here.
The request goes on to vLLM, which listens on loopback only and demands a key
only this process reads (``VLLM_API_KEY``: ``models._serve``), so nothing on
the model host reaches the model but through this door either.

Every request that reaches the door is recorded when it ends, whatever its
outcome, in the model side's tamper-evident record
(``models._request_log``): host, engineer, the session and request ids the
agent asserted, the model, tokens in and out as vLLM counted them (a streamed
request is sent on with ``stream_options.include_usage`` so vLLM's last chunk
carries them), outcome and status.  A handshake refused before any request is
recorded too, under the peer's address (no certificate was believed).  Once a
record could not be written, every request is refused (503, and that refusal's
own record tried) until one is written again: the service does not go on
answering unrecorded.

Before it takes any traffic the front checks the model hosts behind it
(``FrontSettings.declared``; ``models._host_check``): vLLM itself when it
forwards to one, each replica when it forwards to the router.  A host that
answers with another served model, ``max_model_len`` or vLLM version than the
site declared stops the front from starting (``HostMismatch``, naming the host
and the field); its port is never bound.  The weights' digest is each host's
own check (``abhed serve`` hashes its installed weights before vLLM answers):
the front cannot read another host's disk.
"""

from __future__ import annotations

import datetime
import json
import re
import socket
import socketserver
import ssl
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models._credentials import ApiKey, read_api_key
from models._errors import HostMismatch, ModelsError, ServeError
from models._host_check import HostDeclaration, check_model_host
from models._http11 import Exchange, HttpRefusal, Incoming, ThreadedService
from models._request_log import RequestLog, RequestRecord, request_ids
from models._site_tls import ENGINEER_HEADER, Revocations, peer_identity, server_context

if TYPE_CHECKING:
    import httpx

__all__ = ["FrontSettings", "ModelFront", "UsageMeter"]

_ENGINEER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@$-]{0,63}")
_MAX_SCAN = 8 * 1024 * 1024
# Never sent to vLLM: framing, the caller's own key (vLLM's is ours), the site's headers.
_DROP = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding",
                   "te", "trailer", "upgrade", "authorization", "proxy-authorization",
                   "accept-encoding"})


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class FrontSettings:
    """Where the front listens, what it trusts, where it forwards and records."""

    listen_host: str
    listen_port: int
    ca: Path
    credential: Path
    crl: Path
    upstream: str  # vLLM on loopback: http://127.0.0.1:8000
    record: Path
    api_key_file: Path | None = None  # the key vLLM demands (VLLM_API_KEY)
    handshake_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    max_body_bytes: int = 32 * 1024 * 1024
    max_connections: int = 512
    # What the hosts behind must serve; None: not checked (a bare front in a test).
    declared: HostDeclaration | None = None
    # vLLM's root URL on each model host behind the router; empty: ``upstream`` is vLLM.
    replicas: tuple[str, ...] = ()


class UsageMeter:
    """Reads vLLM's token counts out of the bytes passing by, without holding them up.

    A streamed reply is scanned line by line for SSE ``data:`` chunks that carry
    ``usage``; a whole reply is parsed once at the end.  At most 8 MiB of an
    unfinished line or a whole body are kept for the scan; beyond that the
    counts stay 0 and the bytes still pass."""

    def __init__(self, streamed: bool) -> None:
        self.streamed = streamed
        self.tokens_in = 0
        self.tokens_out = 0
        self.model = ""
        self._buf = bytearray()
        self._overflow = False

    def feed(self, data: bytes) -> None:
        if self._overflow:
            return
        self._buf += data
        if not self.streamed:
            if len(self._buf) > _MAX_SCAN:
                self._overflow, self._buf = True, bytearray()
            return
        *lines, rest = bytes(self._buf).split(b"\n")
        self._buf = bytearray(rest)
        for line in lines:
            self._line(line.strip())
        if len(self._buf) > _MAX_SCAN:
            self._overflow, self._buf = True, bytearray()

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:") or b'"usage"' not in line:
            return
        try:
            self._take(json.loads(line[5:]))
        except ValueError:
            pass

    def _take(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            return
        if isinstance(obj.get("model"), str):
            self.model = obj["model"]
        usage = obj.get("usage")
        if isinstance(usage, dict):
            p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(p, int) and p >= 0:
                self.tokens_in = p
            if isinstance(c, int) and c >= 0:
                self.tokens_out = c

    def finish(self) -> None:
        if self._overflow:
            return
        if self.streamed:
            self._line(bytes(self._buf).strip())
        else:
            try:
                self._take(json.loads(bytes(self._buf)))
            except ValueError:
                pass
        self._buf = bytearray()


@dataclass
class _Call:
    """What is known of one request so far: what its record will say."""

    host: str
    engineer: str = "_unknown"
    session_id: str | None = None
    request_id: str | None = None
    model: str = ""
    endpoint: str = ""
    started_at: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    outcome: str = "error"
    status: int = 0
    detail: str = ""


def _log(line: str) -> None:
    sys.stderr.write(f"abhed model-front: {line}\n")
    sys.stderr.flush()


class ModelFront(ThreadedService):
    """The front server; ``serve_forever`` until ``shutdown``; usable as a context manager."""

    def __init__(self, settings: FrontSettings, *, log: RequestLog | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        import httpx

        self.settings = settings
        self.tls = server_context(settings.ca, settings.credential)
        self.revocations = Revocations(settings.crl, settings.ca)
        key: ApiKey | None = None
        if settings.api_key_file is not None:
            try:
                key = read_api_key("model front", str(settings.api_key_file), None)
            except ModelsError as exc:
                raise ServeError(str(exc), reason="api_key") from None
        self._key = key
        self.upstream = settings.upstream.rstrip("/")
        self.check_hosts()  # before the port is bound: a refused host takes no traffic
        self._own_log = log is None
        self.log = log if log is not None else RequestLog(settings.record)
        self._http = httpx.Client(trust_env=False, follow_redirects=False, transport=transport,
                                  limits=httpx.Limits(max_keepalive_connections=0))
        self._slots = threading.BoundedSemaphore(settings.max_connections)
        self._unrecorded = False  # the last append failed: refuse until one succeeds
        front = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                front.handle(self.request, self.client_address)

        family = socket.AF_INET6 if ":" in settings.listen_host else socket.AF_INET

        class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
            # Shutting down waits for the requests in flight (each bounded by its timeouts),
            # so an answer being streamed is finished and recorded, not cut.
            daemon_threads = False
            block_on_close = True
            allow_reuse_address = True
            address_family = family

        self._server: socketserver.TCPServer = Server((settings.listen_host, settings.listen_port), Handler)
        self._thread_name = "model-front"

    def check_hosts(self) -> None:
        """Each model host behind this front against ``settings.declared``: ServeError when
        one does not answer, HostMismatch naming the host and field when one differs."""
        declared = self.settings.declared
        if declared is None:
            return
        # Weights are each host's own check (abhed serve): not readable from here.
        declared = declared.model_copy(update={"weights_digest": None})
        headers = self._key.header() if self._key is not None else None
        if not self.settings.replicas:
            check_model_host(self.upstream, declared, headers=headers)
            return
        # Behind the router a replica that is down is the router's to route around (its
        # health checks); one that answers otherwise than declared is refused, and so is
        # a router with no replica answering at all.
        down: list[str] = []
        for root in self.settings.replicas:
            try:
                check_model_host(root, declared, headers=headers)
            except HostMismatch:
                raise
            except ServeError as exc:
                down.append(str(exc))
        if len(down) == len(self.settings.replicas):
            raise ServeError("no model host behind the router answers, so the model service "
                             "would answer nothing: " + "; ".join(down) + ". Start the model "
                             "hosts (or fix serve.router.replicas) first", reason="unreachable")
        for why in down:
            _log(f"{why}; the router routes around it until it answers")

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    # -- one connection ----------------------------------------------------------------
    def handle(self, raw: socket.socket, address: Any) -> None:
        peer = f"{address[0]}" if isinstance(address, tuple) else str(address)
        started = _now()
        raw.settimeout(self.settings.handshake_timeout_s)
        try:
            sock = self.tls.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        except (ssl.SSLError, OSError):
            return
        try:
            sock.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            # No certificate was believed: the record names the address the attempt came from.
            # Recorded before the connection closes, so a refusal is on record once it is seen.
            self._record(_Call(host=_as_host(peer), started_at=started,
                               outcome="refused", status=0,
                               detail=f"TLS handshake refused from {peer}: {reason} ({exc})"))
            sock.close()
            return
        try:
            self._serve(sock, peer, started)
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _serve(self, sock: ssl.SSLSocket, peer: str, started: str) -> None:
        ex = Exchange(sock, max_body_bytes=self.settings.max_body_bytes)
        ident = peer_identity(sock)
        call = _Call(host=ident.host if ident else _as_host(peer), started_at=started)
        if not self._slots.acquire(blocking=False):
            call.outcome, call.status, call.detail = "refused", 503, "at the connection limit"
            self._record(call)
            ex.refuse(HttpRefusal(503, "busy", "the model service is at its connection "
                                  "limit; retry in a moment"))
            return
        try:
            try:
                if self._unrecorded:
                    raise HttpRefusal(503, "record_unwritable", "the model service cannot "
                                      "write its request record, so it answers nothing; the "
                                      "operator must free disk space or fix the record's file")
                # Read first: a refusal sent over an unread request can be lost to a reset.
                incoming = ex.read()
                if incoming is None:
                    call.outcome, call.detail = "cancelled", "closed before a request"
                    self._record(call)
                    return
                # The path asked for, printable ASCII only: the join tells a listing of the
                # service (/v1/models) from a request that reaches the model.
                call.endpoint = "".join(c for c in incoming.target.split("?", 1)[0]
                                        if "!" <= c <= "~")[:256]
                if ident is None:
                    raise HttpRefusal(403, "no_host", "the client certificate names no host")
                why = self.revocations.check(ident.serial)
                if why == "revoked":
                    raise HttpRefusal(403, "credential_revoked", f"host {ident.host}'s "
                                      f"credential (serial {ident.serial:x}) was revoked by the "
                                      "operator; ask for a new one (`abhed-installer ca issue "
                                      "--rotate`)")
                if why is not None:
                    raise HttpRefusal(503, "revocation_list", why)
                self._admit(incoming, call)
                self._forward(ex, incoming, call)
            except HttpRefusal as refusal:
                # Recorded before it is answered: a refusal the caller sees is on record.
                call.outcome, call.status, call.detail = "refused", refusal.status, refusal.message
                self._record(call)
                ex.refuse(refusal)
                return
        finally:
            self._slots.release()
        self._record(call)  # an answered request: when its answer has ended, tokens counted

    def _admit(self, incoming: Incoming, call: _Call) -> None:
        import httpx

        engineer = incoming.header(ENGINEER_HEADER)
        if engineer is None or not _ENGINEER.fullmatch(engineer):
            raise HttpRefusal(400, "no_engineer", "the request names no engineer: send it "
                              "through this host's model relay (/run/abhed/model.sock), which "
                              "names you")
        call.engineer = engineer
        try:
            call.session_id, call.request_id = request_ids(httpx.Headers(incoming.headers))
        except ModelsError as exc:
            raise HttpRefusal(400, "bad_request_id", str(exc)) from None
        if not incoming.target.startswith("/v1/") or ".." in incoming.target:
            raise HttpRefusal(404, "not_found", f"the model service answers /v1/ only, not "
                              f"{incoming.target[:200]!r}")

    def _forward(self, ex: Exchange, incoming: Incoming, call: _Call) -> None:
        import httpx

        body, streamed = _with_usage(incoming.body, call)
        headers = [(k, v) for k, v in incoming.headers
                   if k not in _DROP and not k.startswith("x-abhed-")]
        headers.append(("accept-encoding", "identity"))
        if self._key is not None:
            headers += list(self._key.header().items())
        timeout = httpx.Timeout(connect=10.0, read=self.settings.read_timeout_s, write=60.0,
                                pool=10.0)
        req = self._http.build_request(incoming.method, self.upstream + incoming.target,
                                       content=body, headers=headers, timeout=timeout)
        try:
            resp = self._http.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise HttpRefusal(503, "model_unavailable", f"the model server behind this service "
                              f"did not answer ({type(exc).__name__}: {exc}); it may be "
                              "starting: retry shortly") from None
        meter = UsageMeter(streamed and resp.headers.get("content-type", "").startswith(
            "text/event-stream"))
        call.status = resp.status_code
        call.outcome = "ok" if resp.status_code < 400 else "error"
        try:
            ex.start(resp.status_code, [(k, v) for k, v in resp.headers.items()
                                        if k.lower() != "content-encoding"])
            for chunk in resp.iter_raw():
                meter.feed(chunk)
                ex.send(chunk)
            ex.end()
        except httpx.HTTPError as exc:
            call.outcome, call.detail = "error", f"the model server's reply broke: {exc}"
        except OSError:
            call.outcome, call.detail = "cancelled", "the caller went away mid-reply"
        finally:
            resp.close()
        meter.finish()
        call.tokens_in, call.tokens_out = meter.tokens_in, meter.tokens_out
        call.model = call.model or meter.model
        if call.outcome == "error" and not call.detail:
            call.detail = f"the model server answered HTTP {resp.status_code}"

    def _record(self, call: _Call) -> None:
        try:
            self.log.append(RequestRecord(
                host=call.host, engineer=call.engineer, session_id=call.session_id,
                request_id=call.request_id, model=call.model[:256], endpoint=call.endpoint,
                started_at=call.started_at,
                ended_at=_now(), tokens_in=call.tokens_in, tokens_out=call.tokens_out,
                outcome=call.outcome, status=call.status, detail=call.detail))  # type: ignore[arg-type]
        except (ModelsError, ValueError) as exc:
            self._unrecorded = True
            _log(f"could not record a request of {call.engineer}@{call.host}: {exc}")
        else:
            self._unrecorded = False

    def _closed(self) -> None:
        if self._own_log:
            self.log.close()


def _with_usage(body: bytes, call: _Call) -> tuple[bytes, bool]:
    """The body to send on: a streamed request asks vLLM for its token counts in the last
    chunk (``stream_options.include_usage``); the model it names goes into the record."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return body, False
    if not isinstance(data, dict):
        return body, False
    if isinstance(data.get("model"), str):
        call.model = data["model"][:256]
    if data.get("stream") is not True:
        return body, False
    opts = data.get("stream_options")
    data["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
    return json.dumps(data).encode(), True


def _as_host(peer: str) -> str:
    """An address as the record's host field takes it (IPv6 colons become dots)."""
    cleaned = re.sub(r"[^A-Za-z0-9.-]", ".", peer).strip(".-") or "unknown"
    return cleaned[:253]
