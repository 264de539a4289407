"""A stand-in for the model host's front, until the real one (site-front's) lands.

Run on the model host as root: ``python front_stub.py KEYS RECORD LISTEN UPSTREAM``.
It does what the real front must do for the request record and the join,
and no more: each request is attributed to (host, engineer) by a per-engineer
key the engineer alone can read, checked against the host the connection
comes from (an engineer cannot ask as another host); the caller's
X-Abhed-Session and X-Abhed-Request are taken through ``models.request_ids``;
the request goes to vLLM, its answer streamed back; and one
``models.RequestRecord`` is appended for every request, refused ones
included.  Not a product component: the real front terminates mutual TLS.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from models import RequestLog, RequestLogError, RequestRecord, request_ids


def _now() -> str:
    return datetime.now(UTC).isoformat()


def main(keys_path: str, record_path: str, listen: str, upstream: str) -> None:
    # key -> [host, engineer, host address]
    keys: dict[str, list[str]] = json.loads(Path(keys_path).read_text())
    hosts = {address: host for host, _, address in keys.values()}
    log = RequestLog(Path(record_path))
    client = httpx.Client(base_url=upstream, timeout=600, trust_env=False)

    class Front(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, host: str, engineer: str, started: str, **fields: Any) -> None:
            log.append(RequestRecord(host=host, engineer=engineer, started_at=started,
                                     ended_at=_now(), endpoint=self.path.split("?")[0][:256],
                                     **fields))

        def do_GET(self) -> None:
            self._serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self._serve(self.rfile.read(length))

        def _serve(self, body: bytes | None) -> None:
            started = _now()
            host = hosts.get(self.client_address[0], "unknown")
            auth = self.headers.get("authorization", "")
            who = keys.get(auth.removeprefix("Bearer ").strip()) if auth else None
            if who is None or who[0] != host:
                self.close_connection = True
                why = "no credential" if not auth else "a credential not issued to this host"
                self._record(host, "unknown", started, outcome="refused", status=401, detail=why)
                self._answer(401, {"error": {"message": f"refused: {why}"}})
                return
            engineer = who[1]
            try:
                session, request = request_ids(self.headers)
            except RequestLogError as exc:
                self._record(host, engineer, started, outcome="refused", status=400,
                             detail=str(exc))
                self._answer(400, {"error": {"message": str(exc)}})
                return
            payload = json.loads(body) if body else {}
            model = str(payload.get("model", ""))[:256] if isinstance(payload, dict) else ""
            usage: dict[str, int] = {}
            status = 0
            try:
                req = client.build_request("POST" if body is not None else "GET", self.path,
                                           content=body,
                                           headers={"content-type": "application/json"})
                resp = client.send(req, stream=True)
                status = resp.status_code
                self.send_response(status)
                self.send_header("content-type", resp.headers.get("content-type", "text/plain"))
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                for line in resp.iter_lines():
                    self.wfile.write(line.encode() + b"\n")
                    if line.startswith("data:") and '"usage"' in line:
                        try:
                            got = json.loads(line[5:]).get("usage") or {}
                            usage = {k: int(v) for k, v in got.items() if isinstance(v, int)}
                        except ValueError:
                            pass
                    elif line.startswith("{") and '"usage"' in line:
                        got = json.loads(line).get("usage") or {}
                        usage = {k: int(v) for k, v in got.items() if isinstance(v, int)}
                resp.close()
                outcome = "ok" if status < 400 else "error"
                detail = "" if status < 400 else f"vLLM answered {status}"
            except (httpx.HTTPError, OSError) as exc:
                outcome, detail = ("cancelled" if isinstance(exc, OSError) else "error",
                                   f"{type(exc).__name__}: {exc}")
            self._record(host, engineer, started, session_id=session, request_id=request,
                         model=model, tokens_in=usage.get("prompt_tokens", 0),
                         tokens_out=usage.get("completion_tokens", 0), outcome=outcome,
                         status=status, detail=detail)

    address, port = listen.rsplit(":", 1)
    server = ThreadingHTTPServer((address, int(port)), Front)
    print(f"listening {listen}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:5])
