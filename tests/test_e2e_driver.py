"""The whole-appliance test's driver (``ASK_DRIVER``) waits for what proves a model server ready.

uvicorn writes "Application startup complete" before its socket listens; on a cold,
loaded machine the next request was refused and the whole-appliance test failed for no
fault of the appliance.  So the driver waits on no log line: it polls ``/health`` and
``/v1/models`` with a deadline.  These run it against a stand-in server that prints the
line and then pauses before it listens, one that never prints it, and one that dies, fast
and without vLLM.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e_driver import ASK_DRIVER

SERVER = '''#!{python}
import http.server, json, os, time
{line}
time.sleep({listen_after_s})  # the socket listens only now, as uvicorn's does
{before_listen}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"{{}}" if self.path == "/health" else json.dumps({{"data": [{{"id": "m"}}]}}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["ABHED_MODEL_PORT"])), H).serve_forever()
'''


def _prefix(tmp_path: Path, listen_after_s: float, before_listen: str = "",
            line: str = 'print("INFO:     Application startup complete.", flush=True)') -> Path:
    prefix = tmp_path / "prefix"
    for d in ("current", "logs", "bin"):
        (prefix / d).mkdir(parents=True)
    server = prefix / "current" / "run-model-server"
    server.write_text(SERVER.format(python=sys.executable, listen_after_s=listen_after_s,
                                    before_listen=before_listen, line=line))
    abhed = prefix / "bin" / "abhed"
    abhed.write_text("#!/bin/sh\necho 'the code name is in notes.txt'\n")
    server.chmod(0o755)
    abhed.chmod(0o755)
    return prefix


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drive(prefix: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ASK_DRIVER, str(prefix), str(tmp_path),
                           str(_port())], capture_output=True, text=True, timeout=60,
                          check=False)


def test_a_server_that_listens_after_its_startup_line_is_waited_for(tmp_path: Path) -> None:
    done = _drive(_prefix(tmp_path, listen_after_s=1.5), tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["rc"] == 0


def test_a_server_that_dies_after_its_startup_line_is_reported_not_waited_on(
        tmp_path: Path) -> None:
    done = _drive(_prefix(tmp_path, listen_after_s=0.2, before_listen="raise SystemExit(3)"),
                  tmp_path)
    assert done.returncode != 0
    assert "never answered /health" in done.stderr


def test_a_server_that_never_writes_the_startup_line_is_ready_when_it_answers(
        tmp_path: Path) -> None:
    done = _drive(_prefix(tmp_path, listen_after_s=0.5, line=""), tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["rc"] == 0
