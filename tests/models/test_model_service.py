"""The model service knows who asks: a host's relay and a model host's front, for real.

Real parts: the site CA and host credentials from ``installer._site_ca`` (cryptography),
mutual TLS through Python's ssl, the relay as a root process (``abhed model-relay``) in a
private mount namespace whose /etc/passwd names the test's engineers, engineers as real
uids through setpriv (the kernel's SO_PEERCRED names them), and the request record in
SQLite.  The upstream is the scripted OpenAI server (vLLM's CPU build behind the same front
is tests/models/test_model_service_vllm.py), and, for the pass-through test, a server that
holds its stream until the test has read the first chunk.
"""

from __future__ import annotations

import datetime
import json
import os
import select
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from installer._site_ca import SiteCA
from models import REQUEST_HEADER, SESSION_HEADER, RequestRecord, read_requests
from models.scripted import ScriptedServer, ScriptStep
from models.service import FrontSettings, ModelFront
from tests.helpers import shared_scratch, side_by_side, wait_for

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="real users and a root relay need root"),
              pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("setpriv") is None,
                                 reason="needs util-linux's unshare and setpriv")]

ENGINEERS = {"eng-a": 2101, "eng-b": 2102, "eng-c": 2103}  # eng-c is never enrolled
VLLM_KEY = "vllm-key-only-the-front-reads"
ABHED = Path(sys.executable).with_name("abhed")


def _write(path: Path, data: bytes, mode: int) -> Path:
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def _enrol(path: Path, names: list[str]) -> None:
    """The enrolment file as ``abhed-installer engineer enroll`` writes it."""
    body = {"format": "abhed-engineers/1",
            "engineers": {n: {"uid": ENGINEERS[n], "enrolled": "2026-12-04T00:00:00+00:00"}
                          for n in names}}
    tmp = path.with_name(".engineers.tmp")
    tmp.write_text(json.dumps(body))
    os.replace(tmp, path)


@dataclass
class Site:
    base: Path
    ca: SiteCA
    front: ModelFront
    upstream: ScriptedServer
    socket: Path
    credential: Path
    engineers: Path
    creds: dict[str, Path]

    @property
    def front_url(self) -> str:
        return f"https://127.0.0.1:{self.front.port}"

    def records(self) -> list[RequestRecord]:
        return [s.record for s in read_requests(self.base / "model/requests.sqlite")]

    def new_records(self, before: int, count: int) -> list[RequestRecord]:
        """The records after the first ``before``, once there are ``count`` of them: an
        answered request is recorded when its answer has ended, which the caller may see
        a moment sooner."""
        wait_for(lambda: len(self.records()) - before >= count, 30,
                 what=f"{count} new request record(s)")
        new = self.records()[before:]
        assert len(new) == count, new
        return new

    def as_engineer(self, name: str, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        uid = ENGINEERS[name]
        return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                               sys.executable, "-c", code, *args],
                              env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                   "LANG": "C.UTF-8"},
                              capture_output=True, text=True, timeout=120, check=False,
                              cwd="/")


# A raw call through the relay, as an engineer's own script would make it.
RAW = """
import json, sys, httpx
sock, body, headers = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
with httpx.Client(transport=httpx.HTTPTransport(uds=sock), timeout=60) as c:
    r = c.post("http://model-service/v1/chat/completions", json=body, headers=headers)
    print(json.dumps({"status": r.status_code, "body": r.text}))
"""

# The agent's own provider, pointed at the relay as the site layer points it.
PROVIDER = """
import json, sys
from models import ChatRequest, ProviderConfig, open_provider
conf = ProviderConfig(name="site", api="openai", base_url="http://model-service/v1",
                      unix_socket=sys.argv[1], model="scripted", max_retries=0)
p = open_provider(conf)
reply = p.complete(ChatRequest([{"role": "user", "content": sys.argv[2]}], stream=True))
print(json.dumps({"text": reply.text}))
"""


def _raw(site: Site, name: str, body: dict[str, Any] | None = None,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    body = body or {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
    done = site.as_engineer(name, RAW, str(site.socket), json.dumps(body),
                            json.dumps(headers or {}))
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _start_relay(base: Path, passwd: Path, socket: Path, upstream: str, ca: Path,
                 credential: Path, engineers: Path) -> subprocess.Popen[str]:
    """``abhed model-relay`` as root, in a mount namespace where /etc/passwd has our users."""
    with open(base / "relay.log", "w") as log:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount --bind "$1" /etc/passwd && shift && exec "$@"', "sh", str(passwd),
             str(ABHED), "model-relay", "--socket", str(socket), "--upstream", upstream,
             "--ca", str(ca), "--credential", str(credential), "--engineers", str(engineers)],
            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("listening on"):
                return proc
            if not line:
                break
    os.killpg(proc.pid, 9)
    proc.wait(30)
    proc.stdout.close()
    raise AssertionError("the relay did not start: " + (base / "relay.log").read_text())


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with shared_scratch("abhed-model-service-") as base:
        ca = SiteCA(base / "ca")
        ca.init("test-site", days=30)
        model_dir = base / "model"
        model_dir.mkdir(mode=0o700)
        agent_dir = base / "agent"
        agent_dir.mkdir(mode=0o755)
        model = ca.issue("model-a", "model", dns=["localhost"], ips=["127.0.0.1"], days=30)
        agent = ca.issue("agent-1", "agent", dns=[], ips=[], days=30)
        assert model.pem and agent.pem
        front_cred = _write(model_dir / "host.pem", model.pem, 0o600)
        credential = _write(agent_dir / "host.pem", agent.pem, 0o600)
        # The credential file's last certificate is the CA's; every host trusts it.
        shutil.copy(ca.cert_path, agent_dir / "ca.pem")
        shutil.copy(ca.crl_path, model_dir / "crl.pem")
        key_file = _write(model_dir / "vllm.key", VLLM_KEY.encode(), 0o600)
        passwd = base / "passwd"
        passwd.write_text(Path("/etc/passwd").read_text() + "".join(
            f"{n}:x:{u}:{u}::/nonexistent:/usr/sbin/nologin\n" for n, u in ENGINEERS.items()))
        engineers = agent_dir / "engineers.json"
        _enrol(engineers, ["eng-a", "eng-b"])
        upstream = ScriptedServer(responder=lambda body: ScriptStep(
            text="echo: " + str(body["messages"][-1]["content"])), api_key=VLLM_KEY)
        with upstream:
            front = ModelFront(FrontSettings(
                listen_host="127.0.0.1", listen_port=0, ca=ca.cert_path, credential=front_cred,
                crl=model_dir / "crl.pem", upstream=upstream.base_url.removesuffix("/v1"),
                record=model_dir / "requests.sqlite", api_key_file=key_file))
            with front:
                socket = agent_dir / "run" / "model.sock"
                relay = _start_relay(base, passwd, socket, f"https://127.0.0.1:{front.port}",
                                     agent_dir / "ca.pem", credential, engineers)
                try:
                    yield Site(base, ca, front, upstream, socket, credential, engineers,
                               {"model": front_cred})
                finally:
                    os.killpg(relay.pid, 15)
                    relay.wait(30)
                    assert relay.stdout is not None
                    relay.stdout.close()


def test_two_engineers_on_one_host_are_each_attributed(site: Site) -> None:
    before = len(site.records())

    def ask(name: str) -> Any:
        return site.as_engineer(name, PROVIDER, str(site.socket), f"hello from {name}")

    answers = side_by_side(ask, ("eng-a", "eng-b"), 120)
    for name in ("eng-a", "eng-b"):
        done = answers[name]
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"] == f"echo: hello from {name}"
    new = site.new_records(before, 2)
    assert sorted(r.engineer for r in new) == ["eng-a", "eng-b"]
    for r in new:
        assert (r.host, r.outcome, r.status, r.model) == ("agent-1", "ok", 200, "scripted")
        assert r.endpoint == "/v1/chat/completions"
        assert r.tokens_in > 0 and r.tokens_out > 0  # from the stream's usage chunk
    # vLLM's key went with each request; the engineers never held it.
    assert site.upstream.authorizations[-1] == f"Bearer {VLLM_KEY}"


def test_session_and_request_ids_pass_through_and_a_spoofed_engineer_is_overwritten(
        site: Site) -> None:
    before = len(site.records())
    got = _raw(site, "eng-a", headers={"X-Abhed-Engineer": "eng-b", "x-abhed-host": "model-a",
                                       SESSION_HEADER: "sess-1", REQUEST_HEADER: "req-1.2",
                                       "Authorization": "Bearer stolen"})
    assert got["status"] == 200, got
    (rec,) = site.new_records(before, 1)
    assert (rec.engineer, rec.host) == ("eng-a", "agent-1")
    assert (rec.session_id, rec.request_id) == ("sess-1", "req-1.2")
    assert site.upstream.authorizations[-1] == f"Bearer {VLLM_KEY}"


def test_an_engineer_cannot_read_the_host_credential(site: Site) -> None:
    done = site.as_engineer("eng-a", "import sys; open(sys.argv[1]).read()", str(site.credential))
    assert done.returncode != 0 and "Permission denied" in done.stderr


def test_an_unenrolled_engineer_is_refused_and_a_revoked_one_from_the_next_request(
        site: Site) -> None:
    got = _raw(site, "eng-c")
    assert got["status"] == 403
    err = json.loads(got["body"])["error"]
    assert err["code"] == "not_enrolled" and "engineer enroll eng-c" in err["message"]
    _enrol(site.engineers, ["eng-a"])
    try:
        got = _raw(site, "eng-b")
        assert got["status"] == 403 and "not enrolled" in got["body"]
        assert _raw(site, "eng-a")["status"] == 200
    finally:
        _enrol(site.engineers, ["eng-a", "eng-b"])


def _direct(site: Site, cert: Path | None) -> httpx.Response:
    ctx = ssl.create_default_context(cafile=str(site.ca.cert_path))
    if cert is not None:
        ctx.load_cert_chain(str(cert))
    with httpx.Client(verify=ctx, trust_env=False, timeout=30) as c:
        return c.post(site.front_url + "/v1/chat/completions",
                      json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]},
                      headers={"X-Abhed-Engineer": "eng-a"})


def test_the_front_refuses_a_call_without_a_certificate_and_records_it(site: Site) -> None:
    before = len(site.records())
    with pytest.raises(httpx.HTTPError):
        _direct(site, None)
    # The client sees the failed handshake a moment before the front has recorded it.
    (rec,) = site.new_records(before, 1)
    assert rec.outcome == "refused" and "handshake" in rec.detail and rec.host == "127.0.0.1"
    # Plain HTTP to the TLS port gets nothing either.
    with pytest.raises(httpx.HTTPError), httpx.Client(trust_env=False, timeout=30) as c:
        c.post(f"http://127.0.0.1:{site.front.port}/v1/chat/completions", json={})


def test_another_sites_expired_and_revoked_credentials_are_refused(site: Site) -> None:
    other = SiteCA(site.base / "other-ca")
    other.init("other-site", days=30)
    foreign = other.issue("agent-1", "agent", dns=[], ips=[], days=30)
    old = site.ca.issue("agent-old", "agent", dns=[], ips=[], days=1,
                        valid_from=datetime.datetime.now(datetime.UTC)
                        - datetime.timedelta(days=3))
    gone = site.ca.issue("agent-gone", "agent", dns=[], ips=[], days=30)
    assert foreign.pem and old.pem and gone.pem
    paths = {n: _write(site.base / f"{n}.pem", i.pem, 0o600)
             for n, i in (("foreign", foreign), ("old", old), ("gone", gone))}
    answered = len(site.records())
    assert _direct(site, paths["gone"]).status_code == 200  # valid until revoked
    site.new_records(answered, 1)
    site.ca.revoke("agent-gone")
    shutil.copy(site.ca.crl_path, site.base / "model/crl.pem")
    before = len(site.records())
    for name in ("foreign", "old"):
        with pytest.raises(httpx.HTTPError):
            _direct(site, paths[name])
    resp = _direct(site, paths["gone"])
    assert resp.status_code == 403
    assert resp.json()["error"]["code"] == "credential_revoked"
    assert "agent-gone" in resp.json()["error"]["message"]
    recs = site.new_records(before, 3)
    assert [r.outcome for r in recs] == ["refused"] * 3
    # Each refused handshake is recorded by the connection's own thread: in any order.
    handshakes = sorted((r for r in recs if r.host != "agent-gone"),
                        key=lambda r: "expired" in r.detail.lower())
    assert len(handshakes) == 2
    assert "unknown ca" in handshakes[0].detail.lower() or \
        "certificate" in handshakes[0].detail.lower()
    assert "expired" in handshakes[1].detail.lower()
    assert [(r.host, r.status) for r in recs if r.host == "agent-gone"] == [("agent-gone", 403)]


def test_a_call_with_no_engineer_is_refused(site: Site) -> None:
    # A host credential alone does not make a request: the relay's name is required.
    ctx = ssl.create_default_context(cafile=str(site.ca.cert_path))
    ctx.load_cert_chain(str(site.credential))
    before = len(site.records())
    with httpx.Client(verify=ctx, trust_env=False, timeout=30) as c:
        resp = c.get(site.front_url + "/v1/models")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "no_engineer"
    assert [r.outcome for r in site.new_records(before, 1)] == ["refused"]


class _HeldStream(BaseHTTPRequestHandler):
    """Sends one SSE chunk, then waits for the test to say it has read it."""

    release = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()

        def send(obj: Any) -> None:
            data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
            self.wfile.write(b"data: " + data + b"\n\n")
            self.wfile.flush()

        send({"model": "held", "choices": [{"index": 0, "delta": {"content": "first"}}]})
        if not self.release.wait(60):
            return
        send({"model": "held", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        send({"model": "held", "choices": [], "usage": {"prompt_tokens": 7,
                                                        "completion_tokens": 2}})
        send(b"[DONE]")


def _bare_front(site: Site, tmp_path: Path, upstream: str) -> tuple[ModelFront, ssl.SSLContext]:
    """A front over ``upstream`` (no key file, no declared host) and the TLS context a
    client with the site's credential reaches it with."""
    front = ModelFront(FrontSettings(
        listen_host="127.0.0.1", listen_port=0, ca=site.ca.cert_path,
        credential=site.creds["model"], crl=site.base / "model/crl.pem",
        upstream=upstream, record=tmp_path / "r.sqlite"))
    ctx = ssl.create_default_context(cafile=str(site.ca.cert_path))
    ctx.load_cert_chain(str(site.credential))
    return front, ctx


def test_a_stream_passes_through_chunk_by_chunk(site: Site, tmp_path: Path) -> None:
    held = ThreadingHTTPServer(("127.0.0.1", 0), _HeldStream)
    threading.Thread(target=held.serve_forever, daemon=True).start()
    front, ctx = _bare_front(site, tmp_path, f"http://127.0.0.1:{held.server_address[1]}")
    try:
        with front, httpx.Client(verify=ctx, trust_env=False, timeout=30) as c, c.stream(
                "POST", f"https://127.0.0.1:{front.port}/v1/chat/completions",
                json={"model": "held", "stream": True, "messages": []},
                headers={"X-Abhed-Engineer": "eng-a"}) as resp:
            lines = resp.iter_lines()
            first = next(line for line in lines if line)
            assert "first" in first  # read while the upstream still holds the rest
            _HeldStream.release.set()
            rest = [line for line in lines if line]
        assert rest[-1] == "data: [DONE]"
        (rec,) = read_requests(tmp_path / "r.sqlite")
        assert (rec.record.tokens_in, rec.record.tokens_out) == (7, 2)
        assert rec.record.engineer == "eng-a" and rec.record.outcome == "ok"
    finally:
        held.shutdown()
        held.server_close()


def _tls_raw(site: Site, data: bytes) -> bytes:
    """Send ``data`` to the front over TLS with a host credential; everything it answers."""
    import socket as so

    ctx = ssl.create_default_context(cafile=str(site.ca.cert_path))
    ctx.load_cert_chain(str(site.credential))
    with so.create_connection(("127.0.0.1", site.front.port), timeout=30) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


@pytest.mark.parametrize(("request_bytes", "status", "code"), [
    (b"NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
    (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 999999999\r\n\r\n",
     413, "too_large"),
    (b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-abhed-engineer: eng-a\r\n"
     b"x-abhed-session: not an id\r\n\r\n", 400, "bad_request_id"),
    (b"GET /health HTTP/1.1\r\nhost: x\r\nx-abhed-engineer: eng-a\r\n\r\n", 404, "not_found"),
    (b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-abhed-engineer: a b\r\n\r\n", 400, "no_engineer"),
    (b"GET /v1/models HTTP/1.1\r\nhost: x\r\n" + b"x-pad: " + b"a" * 100_000 + b"\r\n\r\n",
     431, "bad_request"),
], ids=["not-http", "huge-body", "bad-session-id", "not-v1", "bad-engineer", "huge-head"])
def test_the_front_answers_hostile_requests_with_a_json_error(
        site: Site, request_bytes: bytes, status: int, code: str) -> None:
    before = len(site.records())
    got = _tls_raw(site, request_bytes)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == str(status).encode(), got[:300]
    assert json.loads(body)["error"]["code"] == code
    rec = site.new_records(before, 1)
    assert [r.outcome for r in rec] == ["refused"] and rec[0].host == "agent-1"


RAW_SOCKET = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode())
out = b""
while chunk := s.recv(65536):
    out += chunk
sys.stdout.write(out.decode())
"""


@pytest.mark.parametrize(("request_text", "status"), [
    ("garbage\r\n\r\n", "400"),
    ("GET /health HTTP/1.1\r\nhost: x\r\n\r\n", "404"),
    ("GET /v1/../health HTTP/1.1\r\nhost: x\r\n\r\n", "404"),
    ("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 99999999999\r\n\r\n",
     "413"),
], ids=["garbage", "not-v1", "dot-dot", "huge-body"])
def test_the_relay_answers_hostile_requests_with_a_json_error(site: Site, request_text: str,
                                                              status: str) -> None:
    done = site.as_engineer("eng-a", RAW_SOCKET, str(site.socket), request_text)
    assert done.returncode == 0, done.stderr
    head, _, body = done.stdout.partition("\n\n")  # text mode made each CRLF a newline
    assert head.split(" ")[1] == status, done.stdout[:300]
    assert json.loads(body)["error"]["message"]


def test_a_model_host_that_answers_as_another_is_refused_by_the_relay(site: Site,
                                                                    tmp_path: Path) -> None:
    """The relay checks the front's certificate names the host it asked for: a model host
    answering with its own (valid, same-CA) certificate for another name is not believed."""
    from models.service import ModelRelay, RelaySettings

    impostor = site.ca.issue("model-b", "model", dns=[], ips=[], days=30)  # no 127.0.0.1
    assert impostor.pem
    cred = _write(tmp_path / "model-b.pem", impostor.pem, 0o600)
    (tmp_path / "engineers.json").write_text(json.dumps(
        {"format": "abhed-engineers/1", "engineers": {"root": {"uid": 0}}}))
    other = ModelFront(FrontSettings(
        listen_host="127.0.0.1", listen_port=0, ca=site.ca.cert_path, credential=cred,
        crl=site.base / "model/crl.pem", upstream=site.upstream.base_url.removesuffix("/v1"),
        record=tmp_path / "r.sqlite"))
    with other, ModelRelay(RelaySettings(
            socket_path=tmp_path / "m.sock", upstreams=[f"https://127.0.0.1:{other.port}"],
            ca=site.ca.cert_path, credential=site.credential,
            enrolment=tmp_path / "engineers.json")), httpx.Client(
            transport=httpx.HTTPTransport(uds=str(tmp_path / "m.sock")), timeout=30) as c:
        resp = c.post("http://model-service/v1/chat/completions",
                      json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]})
    assert resp.status_code == 502
    err = resp.json()["error"]
    assert err["code"] == "upstream_unreachable" and "does not name the host" in err["message"]


@pytest.mark.parametrize("kind", ["foreign", "expired", "revoked"])
def test_a_relay_holding_a_bad_credential_tells_the_engineer_why(site: Site, tmp_path: Path,
                                                                 kind: str) -> None:
    """What an engineer sees when their host's credential is another site's, expired or
    revoked: the relay's JSON error names the certificate problem and the way out."""
    from models.service import ModelRelay, RelaySettings

    if kind == "foreign":
        other = SiteCA(tmp_path / "other-ca")
        other.init("elsewhere", days=30)
        issued = other.issue("agent-9", "agent", dns=[], ips=[], days=30)
    else:
        issued = site.ca.issue(f"agent-{kind}", "agent", dns=[], ips=[], days=1,
                               valid_from=datetime.datetime.now(datetime.UTC)
                               - datetime.timedelta(days=3 if kind == "expired" else 0))
    if kind == "revoked":
        site.ca.revoke("agent-revoked")
        shutil.copy(site.ca.crl_path, site.base / "model/crl.pem")
    assert issued.pem
    cred = _write(tmp_path / "cred.pem", issued.pem, 0o600)
    (tmp_path / "engineers.json").write_text(json.dumps(
        {"format": "abhed-engineers/1", "engineers": {"root": {"uid": 0}}}))
    with ModelRelay(RelaySettings(
            socket_path=tmp_path / "m.sock", upstreams=[site.front_url], ca=site.ca.cert_path,
            credential=cred, enrolment=tmp_path / "engineers.json")), httpx.Client(
            transport=httpx.HTTPTransport(uds=str(tmp_path / "m.sock")), timeout=30) as c:
        resp = c.post("http://model-service/v1/chat/completions",
                      json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]})
    message = resp.json()["error"]["message"]
    expected = {"foreign": "does not trust the CA that issued this host's credential",
                "expired": "has expired", "revoked": "was revoked"}[kind]
    assert resp.status_code in (403, 502) and expected in message, message


def test_a_model_server_that_is_down_is_a_503_the_agent_retries_and_it_is_recorded(
        site: Site, tmp_path: Path) -> None:
    import socket as so

    with so.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    front, ctx = _bare_front(site, tmp_path, f"http://127.0.0.1:{port}")
    with front, httpx.Client(verify=ctx, trust_env=False, timeout=30) as c:
        resp = c.post(f"https://127.0.0.1:{front.port}/v1/chat/completions", json={},
                      headers={"X-Abhed-Engineer": "eng-a"})
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "model_unavailable"
    (rec,) = read_requests(tmp_path / "r.sqlite")
    assert (rec.record.outcome, rec.record.status, rec.record.engineer) == ("refused", 503,
                                                                           "eng-a")


def _front_over(site: Site, tmp_path: Path, upstream: str, replicas: tuple[str, ...] = (),
                record: str = "r.sqlite", **declared: Any) -> ModelFront:
    from models import HostDeclaration

    return ModelFront(FrontSettings(
        listen_host="127.0.0.1", listen_port=0, ca=site.ca.cert_path,
        credential=site.creds["model"], crl=site.base / "model/crl.pem", upstream=upstream,
        record=tmp_path / record, api_key_file=site.base / "model/vllm.key",
        declared=HostDeclaration(**{"served_name": "site-model", "max_model_len": 4096,
                                    "vllm_version": "0.11.0", **declared}),
        replicas=replicas))


def test_the_front_checks_each_model_host_behind_it_before_it_takes_traffic(
        site: Site, tmp_path: Path) -> None:
    """A replica answering with another model, context length or vLLM version stops the
    front before its port is bound, naming the replica and the field; a replica that is down
    is the router's to route around, but a router with none answering is refused."""
    from models import HostMismatch, ServeError

    def host(**kw: Any) -> ScriptedServer:
        return ScriptedServer(**{"model": "site-model", "max_model_len": 4096,
                                 "vllm_version": "0.11.0", "api_key": VLLM_KEY, **kw})

    import socket as so

    with so.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    with host() as good, host(vllm_version="0.12.0") as newer, \
            host(model="other-model") as other, host(max_model_len=8192) as longer:
        roots = {n: s.base_url.removesuffix("/v1")
                 for n, s in (("good", good), ("newer", newer), ("other", other),
                              ("longer", longer))}
        with _front_over(site, tmp_path, roots["good"]) as front:  # no router: vLLM itself
            assert front.port > 0
        with _front_over(site, tmp_path, "http://127.0.0.1:1", (roots["good"], down)):
            pass  # one replica down: the router's health checks route around it
        for name, field in (("newer", "vllm_version"), ("other", "served_name"),
                            ("longer", "max_model_len")):
            with pytest.raises(HostMismatch) as info:
                _front_over(site, tmp_path, "http://127.0.0.1:1", (roots["good"], roots[name]),
                            "refused.sqlite")
            assert info.value.field == field and roots[name] in str(info.value)
        with pytest.raises(ServeError, match="no model host behind the router answers"):
            _front_over(site, tmp_path, "http://127.0.0.1:1", (down,), "refused.sqlite")
        with pytest.raises(HostMismatch, match="vllm_version"):  # one host, no router
            _front_over(site, tmp_path, roots["newer"], record="refused.sqlite")
    assert not (tmp_path / "refused.sqlite").exists()  # refused before the record was opened


def test_abhed_model_front_refuses_a_replica_of_another_vllm(site: Site, tmp_path: Path) -> None:
    from models import CatalogEntry

    (tmp_path / "w").mkdir()
    entry = CatalogEntry(name="m", served_name="site-model", weights_dir=str(tmp_path / "w"),
                         max_model_len=4096, vllm_version="0.11.0")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))
    with ScriptedServer(model="site-model", max_model_len=4096, vllm_version="0.12.0",
                        api_key=VLLM_KEY) as newer:
        proc = subprocess.run(
            [str(ABHED), "model-front", "--host", "127.0.0.1", "--port", "0",
             "--ca", str(site.ca.cert_path), "--credential", str(site.creds["model"]),
             "--crl", str(site.base / "model/crl.pem"), "--upstream", "http://127.0.0.1:1",
             "--api-key-file", str(site.base / "model/vllm.key"),
             "--record", str(tmp_path / "r.sqlite"), "--catalog", str(catalog),
             "--replica", newer.base_url.removesuffix("/v1")],
            capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "vllm_version is '0.12.0', the site declared '0.11.0'" in proc.stderr
    assert "listening" not in proc.stdout

def test_the_gates_relay_admits_only_its_own_uid_and_is_recorded_as_the_gate(
        site: Site) -> None:
    """The installer's gate on an agent host (installer._gate_relay) asks through a relay of
    its own, as root: recorded as the gate, never as an engineer, and no engineer gets in."""
    from models import GATE_ENGINEER
    from models.service import ModelRelay, RelaySettings

    where = site.base / "gate"
    where.mkdir(mode=0o755)
    sock = where / "model.sock"
    before = len(site.records())
    with ModelRelay(RelaySettings(socket_path=sock, upstreams=[site.front_url],
                                  ca=site.ca.cert_path, credential=site.credential,
                                  enrolment=None, gate=True)), httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as c:
        resp = c.post("http://model-service/v1/chat/completions",
                      headers={"X-Abhed-Engineer": "eng-a"},
                      json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]})
        assert resp.status_code == 200, resp.text
        done = site.as_engineer("eng-a", RAW.replace("sys.argv[1]", repr(str(sock)), 1),
                                "unused", json.dumps({"model": "scripted", "messages": []}), "{}")
    (rec,) = site.new_records(before, 1)
    assert (rec.engineer, rec.host, rec.outcome) == (GATE_ENGINEER, "agent-1", "ok")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["status"] == 403 and json.loads(got["body"])["error"]["code"] == "not_gate"
    # A user who happens to be called so is not the gate: the host's relay refuses the name
    # (and `abhed-installer engineer enroll` will not write it: test_model_access).
    from models.service._enrolment import Enrolment

    listing = where / "engineers.json"
    listing.write_text(json.dumps({"format": "abhed-engineers/1",
                                   "engineers": {GATE_ENGINEER: {"uid": 4242}}}))
    why = Enrolment(listing).check(GATE_ENGINEER, 4242)
    assert why is not None and "health gate" in why
    with pytest.raises(ValueError, match="--engineers"):
        ModelRelay(RelaySettings(socket_path=where / "x.sock", upstreams=[site.front_url],
                                 ca=site.ca.cert_path, credential=site.credential,
                                 enrolment=None))


@pytest.mark.parametrize("extra", [[], ["--gate", "--engineers", "/x/engineers.json"]],
                         ids=["neither", "both"])
def test_the_relay_takes_engineers_or_gate_never_both_nor_neither(extra: list[str]) -> None:
    from click.testing import CliRunner

    from cli.model_service import model_relay

    got = CliRunner().invoke(model_relay, ["--upstream", "https://m:8443", "--ca", "/x/ca.pem",
                                           "--credential", "/x/host.pem", *extra])
    assert got.exit_code == 2 and "--engineers" in got.output and "--gate" in got.output
