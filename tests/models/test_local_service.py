"""A model service started on demand: it answers only its user, and stops when unused.

Real processes throughout: the keeper is the real ``abhed serve --socket
--stop-when-unused``, the client the real composition (``reach_provider``) and
httpx over the real Unix socket; only vLLM is stood in for by a small HTTP server
on the socket it is told (``--uds``).  The second user is a real Unix user
(setpriv), as in tests/installer/test_shared_host.py.  The real vLLM on demand is
tests/test_newcomer_path.py's.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.compose import load_config, load_config_catalog, local_service, reach_provider
from models import LocalService, ServeError, open_provider
from tests.helpers import wait_for, write_tiny_catalog

FAKE_VLLM_UDS = r'''
import json, os, socketserver, sys
from http.server import BaseHTTPRequestHandler
args = sys.argv
path = args[args.index("--uds") + 1]; name = args[args.index("--served-model-name") + 1]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def address_string(self): return "unix"
    def do_GET(self):
        listing = {"data": [{"id": name, "max_model_len": int(args[args.index("--max-model-len") + 1])}]}
        body = b"{}" if self.path == "/health" else json.dumps(listing).encode()
        self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
        self.wfile.write(body)
print("fake vllm up on", path, flush=True)
socketserver.UnixStreamServer(path, H).serve_forever()
'''


def _setup(tmp_path: Path, home: Path, idle_s: float) -> None:
    write_tiny_catalog(home, tmp_path / "weights", "tiny-served")
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n{FAKE_VLLM_UDS}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (home / "config.json").write_text(json.dumps({
        "serve": {"vllm_python": str(fake), "idle_stop_s": idle_s},
        "custom_providers": [{"name": "local", "api": "openai", "base_url": "http://localhost/v1",
                              "catalog_entry": "tiny", "model": "tiny-served",
                              "start_on_demand": True}]}))


def test_started_on_demand_answers_over_its_socket_and_stops_once_unused(
        tmp_path: Path, abhed_home: Path) -> None:
    _setup(tmp_path, abhed_home, idle_s=1)
    config = load_config()
    said: list[str] = []
    pconf, hold = reach_provider(config, config.custom_providers[0], say=said.append)
    assert hold is not None
    svc = local_service(pconf)
    try:
        assert len(said) == 1 and "starting the local model service for tiny" in said[0]
        assert str(svc.log_path) in said[0] and "fake vllm up" in svc.log_path.read_text()
        assert pconf.unix_socket == str(abhed_home / "run" / "tiny.sock")
        assert stat.S_IMODE((abhed_home / "run").stat().st_mode) == 0o700
        provider = open_provider(pconf, catalog=load_config_catalog(config), check_model=True)
        assert provider.model == "tiny-served"
        provider.close()
        # A second door while it runs: no second service, nothing said.
        again: list[str] = []
        _, second = reach_provider(config, config.custom_providers[0], say=again.append)
        assert second is not None and again == []
        second.release()
        assert svc.keeper_running()  # still held by the first
    finally:
        hold.release()
    # Nothing holds it now: the keeper stops vLLM after serve.idle_stop_s and removes its socket.
    wait_for(lambda: not svc.keeper_running() and not svc.socket.exists(), 60,
             what="the unused service to stop")
    assert "no abhed has used tiny for 1 s" in svc.log_path.read_text()


def test_a_keeper_that_dies_is_named_with_its_log(tmp_path: Path, abhed_home: Path) -> None:
    _setup(tmp_path, abhed_home, idle_s=1)
    (tmp_path / "fake-python").write_text(
        f"#!{sys.executable}\nimport sys; print('Cannot allocate memory'); sys.exit(1)\n")
    config = load_config()
    with pytest.raises(ServeError, match="stopped before it answered.*Full log: .*vllm-tiny.log"):
        reach_provider(config, config.custom_providers[0])


def test_the_socket_directory_must_be_ours_and_closed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    run.chmod(0o755)
    svc = LocalService(run, "m", tmp_path / "log")
    with pytest.raises(ServeError, match="mode 0700.*chmod 700"):
        svc.prepare()
    link = tmp_path / "link"
    link.symlink_to(run)
    with pytest.raises(ServeError, match="must be a directory of yours"):
        LocalService(link, "m", tmp_path / "log").prepare()
    with pytest.raises(ServeError, match="longer than the 107 bytes"):
        LocalService(tmp_path / ("x" * 120), "m", tmp_path / "log").prepare()


def test_start_on_demand_without_a_catalog_entry_is_refused() -> None:
    from models import ProviderConfig

    with pytest.raises(ValueError, match="start_on_demand needs catalog_entry"):
        ProviderConfig(name="l", api="openai", base_url="http://localhost/v1", start_on_demand=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a second real user needs root (setpriv)")
def test_another_local_user_cannot_reach_the_service(tmp_path: Path) -> None:
    import socket

    base = tmp_path / "open"  # a path every user may walk, down to the service's own dir
    base.mkdir()
    for p in (tmp_path, base):
        p.chmod(0o755)
    svc = LocalService(base / "run", "m", base / "log")
    svc.prepare()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(svc.socket))
    server.listen(1)
    os.chmod(svc.socket, 0o777)  # even a socket anyone could write: its directory keeps them out
    try:
        probe = ("import socket,sys; s=socket.socket(socket.AF_UNIX)\n"
                 "try: s.connect(sys.argv[1])\nexcept OSError as e: print(type(e).__name__); sys.exit(3)\n"
                 "print('connected')")
        other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                sys.executable, "-c", probe, str(svc.socket)],
                               capture_output=True, text=True, timeout=60, check=False)
        assert other.returncode == 3 and other.stdout.strip() == "PermissionError", other
        mine = subprocess.run([sys.executable, "-c", probe, str(svc.socket)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert mine.stdout.strip() == "connected"
    finally:
        server.close()


def test_serve_refuses_stop_when_unused_without_a_socket(abhed_home: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "cli", "serve", "--stop-when-unused"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "--stop-when-unused needs --socket" in proc.stderr
