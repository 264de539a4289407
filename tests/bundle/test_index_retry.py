"""A gather survives a passing network fault, and fails at once on one that cannot pass.

A real HTTP server on loopback plays the index (PEP 691 JSON listings) and the file host;
it answers each path with the faults it was told to give first, then the truth, and
counts what it was asked.  The CI run that lost one DNS answer among 200 listings is the
reason: a gather of hundreds of requests must not end on one.
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import json
import socket
import ssl
import threading
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bundle import SpecError, _wheels
from bundle._wheels import LockedWheel, fetch_wheels, passing, platform_tags, select_files

from .conftest import make_wheel

PLATS = platform_tags("x86_64", "2.36")


@dataclass
class Index:
    """What the server answers: path -> body, path -> faults to give first, and a count."""

    bodies: dict[str, bytes] = field(default_factory=dict)
    faults: dict[str, list[str]] = field(default_factory=dict)
    asked: dict[str, int] = field(default_factory=dict)
    url: str = ""


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[Index]:
    monkeypatch.setattr(_wheels, "RETRY_DELAYS_S", (0.0, 0.0, 0.0))
    state = Index()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.asked[self.path] = state.asked.get(self.path, 0) + 1
            queue = state.faults.get(self.path, [])
            fault = queue.pop(0) if queue else None
            body = state.bodies.get(self.path)
            if fault == "cut" and body is not None:
                # Promise the whole body, send half, hang up: an IncompleteRead mid-file.
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            if fault is not None or body is None:
                code = int(fault) if fault is not None else 404
                self.send_response(code)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-type", "application/vnd.pypi.simple.v1+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _publish(index: Index, tmp_path: Path, name: str = "demo", version: str = "1.0") -> bytes:
    """A real wheel on the file host and its listing on the index; the wheel's bytes."""
    wheel = make_wheel(tmp_path, name, version)
    data = wheel.read_bytes()
    index.bodies[f"/files/{wheel.name}"] = data
    index.bodies[f"/simple/{name}/"] = json.dumps({"meta": {"api-version": "1.1"}, "files": [{
        "filename": wheel.name, "url": f"/files/{wheel.name}",
        "hashes": {"sha256": hashlib.sha256(data).hexdigest()}, "size": len(data)}]}).encode()
    return data


def _select(index: Index, pins: list[str]) -> list[LockedWheel]:
    return select_files(pins, python="3.12", arch="x86_64", glibc="2.36", say=lambda _: None,
                        index_url=f"{index.url}/simple")


def test_a_listing_that_fails_twice_for_a_passing_reason_is_asked_again(
        index: Index, tmp_path: Path) -> None:
    _publish(index, tmp_path)
    index.faults["/simple/demo/"] = ["503", "429"]
    [chosen] = _select(index, ["demo==1.0"])
    assert chosen.filename == "demo-1.0-py3-none-any.whl"
    assert index.asked["/simple/demo/"] == 3


def test_a_missing_project_fails_at_once_naming_it(index: Index) -> None:
    with pytest.raises(SpecError, match=r"does not list nosuch .*404"):
        _select(index, ["nosuch==1.0"])
    assert index.asked["/simple/nosuch/"] == 1


def test_a_fault_that_does_not_pass_ends_the_gather_after_the_last_try(
        index: Index, tmp_path: Path) -> None:
    _publish(index, tmp_path)
    index.faults["/simple/demo/"] = ["503"] * 10
    with pytest.raises(SpecError, match=r"gave no usable listing of demo .*503"):
        _select(index, ["demo==1.0"])
    assert index.asked["/simple/demo/"] == len(_wheels.RETRY_DELAYS_S) + 1


def test_a_listing_that_is_not_json_is_refused_without_asking_again(index: Index) -> None:
    index.bodies["/simple/junk/"] = b"<html>not a PEP 691 index" + b"\xff" * 4096
    with pytest.raises(SpecError, match="gave no usable listing of junk"):
        _select(index, ["junk==1.0"])
    assert index.asked["/simple/junk/"] == 1


def test_a_download_cut_off_midway_is_fetched_again_whole(index: Index, tmp_path: Path) -> None:
    data = _publish(index, tmp_path)
    [wheel] = _select(index, ["demo==1.0"])
    index.faults[f"/files/{wheel.filename}"] = ["cut", "502"]
    fetched, reused = fetch_wheels([wheel], tmp_path / "cache", tmp_path / "out",
                                   say=lambda _: None, python="3.12", plats=PLATS)
    assert (fetched, reused) == (1, 0)
    assert (tmp_path / "out" / wheel.filename).read_bytes() == data
    assert index.asked[f"/files/{wheel.filename}"] == 3
    assert not list((tmp_path / "cache").rglob("*.partial"))


def test_a_download_that_keeps_failing_leaves_no_partial_file(
        index: Index, tmp_path: Path) -> None:
    _publish(index, tmp_path)
    [wheel] = _select(index, ["demo==1.0"])
    index.faults[f"/files/{wheel.filename}"] = ["cut"] * 10
    with pytest.raises(SpecError, match="download failed"):
        fetch_wheels([wheel], tmp_path / "cache", tmp_path / "out", say=lambda _: None,
                     python="3.12", plats=PLATS)
    assert not list((tmp_path / "cache").rglob("*.partial"))
    assert not list((tmp_path / "cache").rglob("*/sha256/*"))


@pytest.mark.parametrize(("exc", "passes"), [
    (urllib.error.URLError(socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name "
                                                             "resolution")), True),
    (urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known")),
     False),
    (urllib.error.URLError(ConnectionResetError(errno.ECONNRESET, "reset")), True),
    (urllib.error.URLError(TimeoutError("timed out")), True),
    (urllib.error.URLError("unknown url type: gopher"), False),
    (urllib.error.HTTPError("u", 503, "busy", None, None), True),  # type: ignore[arg-type]
    (urllib.error.HTTPError("u", 403, "no", None, None), False),  # type: ignore[arg-type]
    (PermissionError(errno.EACCES, "denied"), False),
    (urllib.error.URLError(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")), True),
    (urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed")),
     False),
])
def test_which_faults_pass(exc: BaseException, passes: bool) -> None:
    assert passing(exc) is passes


def test_a_listing_cut_off_midway_is_asked_again(index: Index, tmp_path: Path) -> None:
    _publish(index, tmp_path)
    index.faults["/simple/demo/"] = ["cut"]
    [chosen] = _select(index, ["demo==1.0"])
    assert chosen.filename == "demo-1.0-py3-none-any.whl"
    assert index.asked["/simple/demo/"] == 2


def test_an_oversized_listing_is_refused_at_once_by_its_size(
        index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wheels, "_LISTING_MAX", 1000)
    index.bodies["/simple/huge/"] = b'{"files": []}' + b" " * 5000
    with pytest.raises(SpecError, match=r"gave no usable listing of huge .*5,013 bytes, over the 1,000"):
        _select(index, ["huge==1.0"])
    assert index.asked["/simple/huge/"] == 1


@pytest.mark.parametrize(("url", "words"), [
    ("https://files.example/a b c\nHost: evil/demo.whl", "download failed"),
    ("http://[::1/demo.whl", "is no URL"),
])
def test_a_wheel_url_that_is_no_url_is_named_not_a_traceback(
        tmp_path: Path, url: str, words: str) -> None:
    wheel = LockedWheel(name="demo", version="1.0", filename="demo-1.0-py3-none-any.whl",
                        url=url, sha256="0" * 64, size=None)
    with pytest.raises(SpecError, match=rf"demo-1.0-py3-none-any.whl: .*{words}"):
        fetch_wheels([wheel], tmp_path / "cache", tmp_path / "out", say=lambda _: None,
                     python="3.12", plats=PLATS)
    assert not list((tmp_path / "cache").rglob("*.partial"))
