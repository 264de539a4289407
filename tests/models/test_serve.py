"""The vLLM launcher's refusals and diagnoses, with real processes standing in for vLLM.

The real vLLM start, health wait and stop are covered in test_vllm_real.py
(through `abhed serve`); here each failure it must name is produced for real:
a taken port, missing or altered weights, a server that exits, runs out of
memory, or never becomes healthy.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from models import OFFLINE_ENV, CatalogEntry, ServeError, ServeSettings, VllmServer, hash_weights


def _entry(tmp_path: Path) -> CatalogEntry:
    w = tmp_path / "weights"
    w.mkdir(exist_ok=True)
    (w / "config.json").write_text("{}")
    return CatalogEntry(name="m", served_name="served-m", weights_dir=str(w), files=hash_weights(w),
                        chat_template="t.jinja", tool_call_parser="qwen3_coder", max_model_len=4096,
                        tensor_parallel_size=2, extra_args=("--enforce-eager",))


def _fake_python(tmp_path: Path, body: str) -> str:
    p = tmp_path / "fake-python"
    p.write_text(f"#!{sys.executable}\n{body}\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_command_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    e = _entry(tmp_path)
    srv = VllmServer(e, log_path=tmp_path / "log", python="/opt/py", port=9001,
                     settings=ServeSettings(env={"VLLM_CPU_KVCACHE_SPACE": "1"}, extra_args=("--seed", "0")))
    cmd = srv.command()
    assert cmd[:3] == ["/opt/py", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(cmd)
    for flag in ("--served-model-name served-m", "--port 9001", "--host 127.0.0.1", "--max-model-len 4096",
                 "--tensor-parallel-size 2", "--enable-auto-tool-choice", "--tool-call-parser qwen3_coder",
                 f"--chat-template {tmp_path}/weights/t.jinja", "--enforce-eager", "--seed 0"):
        assert flag in joined
    env = srv.environment()
    assert all(env[k] == v for k, v in OFFLINE_ENV.items())
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "HTTPS_PROXY" not in env
    assert srv.base_url == "http://127.0.0.1:9001/v1"


def test_port_taken_is_refused_before_starting(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        srv = VllmServer(_entry(tmp_path), log_path=tmp_path / "log", python=sys.executable,
                         port=s.getsockname()[1])
        with pytest.raises(ServeError, match="is taken") as info:
            srv.start()
    assert info.value.reason == "port_taken" and srv.proc is None


def test_a_port_a_stopped_server_left_in_time_wait_is_not_taken(tmp_path: Path) -> None:
    """The bug: a model host restarted behind the router (on the port the router knows) was
    refused "port taken" for a minute, while its old connections sat in TIME_WAIT."""
    from models._serve import _port_free

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as vLLM's server
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = listener.accept()
    conn.close()  # the server closes first: its side waits in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    assert _port_free("127.0.0.1", port)


def test_altered_weights_are_refused_before_starting(tmp_path: Path) -> None:
    e = _entry(tmp_path)
    (tmp_path / "weights" / "config.json").write_text('{"evil": 1}')
    srv = VllmServer(e, log_path=tmp_path / "log", python=sys.executable, port=_port())
    with pytest.raises(ServeError, match="altered") as info:
        srv.start()
    assert info.value.reason == "weights_altered" and srv.proc is None


def test_a_weight_file_replaced_by_a_fifo_is_refused_not_read_forever(tmp_path: Path) -> None:
    e = _entry(tmp_path)
    (tmp_path / "weights" / "config.json").unlink()
    os.mkfifo(tmp_path / "weights" / "config.json")
    srv = VllmServer(e, log_path=tmp_path / "log", python=sys.executable, port=_port())
    with pytest.raises(ServeError, match="is a named pipe") as info:
        srv.start()
    assert info.value.reason == "weights_altered" and srv.proc is None


def test_missing_python_is_named(tmp_path: Path) -> None:
    srv = VllmServer(_entry(tmp_path), log_path=tmp_path / "log", python=str(tmp_path / "nope"), port=_port())
    with pytest.raises(ServeError, match="not an executable Python"):
        srv.start()


@pytest.mark.parametrize(("body", "reason"), [
    ("import sys; print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'); sys.exit(1)",
     "out_of_memory"),
    ("import sys; print(\"ModuleNotFoundError: No module named 'vllm'\"); sys.exit(1)", "vllm_missing"),
    ("import sys; print('OSError: [Errno 98] Address already in use'); sys.exit(1)", "port_taken"),
    ("import sys; print('something else broke'); sys.exit(3)", "server_exited"),
])
def test_exits_are_diagnosed_from_the_log(tmp_path: Path, body: str, reason: str) -> None:
    srv = VllmServer(_entry(tmp_path), log_path=tmp_path / "logs" / "v.log",
                     python=_fake_python(tmp_path, body), port=_port())
    with pytest.raises(ServeError) as info:
        srv.start(timeout_s=60)
    assert info.value.reason == reason
    assert str(tmp_path / "logs" / "v.log") in str(info.value)
    if reason == "server_exited":
        assert "code 3" in str(info.value) and "something else broke" in str(info.value)


def test_never_healthy_times_out_and_is_stopped(tmp_path: Path) -> None:
    srv = VllmServer(_entry(tmp_path), log_path=tmp_path / "v.log",
                     python=_fake_python(tmp_path, "import time; time.sleep(600)"), port=_port())
    with pytest.raises(ServeError, match="did not become healthy") as info:
        srv.start(timeout_s=1.5)
    assert info.value.reason == "timeout"
    assert srv.proc is not None and srv.proc.poll() is not None  # stopped, not left behind


FAKE_VLLM = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
args = sys.argv
port = int(args[args.index("--port") + 1]); name = args[args.index("--served-model-name") + 1]
ctx = int(args[args.index("--max-model-len") + 1])
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        body = b"{}" if self.path == "/health" else json.dumps({"data": [{"id": name, "max_model_len": ctx}]}).encode()
        self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
        self.wfile.write(body)
print("fake vllm up", flush=True)
HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def test_start_waits_for_health_and_models_then_stop_ends_the_group(tmp_path: Path) -> None:
    srv = VllmServer(_entry(tmp_path), log_path=tmp_path / "v.log",
                     python=_fake_python(tmp_path, FAKE_VLLM), port=_port())
    url = srv.start(timeout_s=60)
    assert url == srv.base_url and srv.alive()
    assert "fake vllm up" in (tmp_path / "v.log").read_text()
    pid = srv.proc.pid if srv.proc else 0
    srv.stop(timeout_s=5)
    assert not srv.alive()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_abhed_serve_cli_dry_run_and_hash(tmp_path: Path, abhed_home: Path) -> None:
    e = _entry(tmp_path)
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [e.model_dump(mode="json")]}))
    run = [sys.executable, "-m", "cli", "serve"]
    proc = subprocess.run(run + ["--dry-run", "--python", sys.executable, "--port", str(_port())],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "vllm.entrypoints.openai.api_server" in proc.stdout and "served-m" in proc.stdout
    proc = subprocess.run(run + ["--hash", str(tmp_path / "weights")], check=False, capture_output=True, text=True)
    assert json.loads(proc.stdout) == e.files
    proc = subprocess.run(run + ["--model", "zzz"], check=False, capture_output=True, text=True)
    assert proc.returncode == 2 and "no catalog entry named 'zzz'" in proc.stderr
    (tmp_path / "weights" / "config.json").write_text("tampered")
    proc = subprocess.run(run + ["--python", sys.executable], check=False, capture_output=True, text=True)
    assert proc.returncode == 1 and "altered" in proc.stderr


def test_abhed_serve_cli_reports_a_server_that_exits(tmp_path: Path, abhed_home: Path) -> None:
    e = _entry(tmp_path)
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [e.model_dump(mode="json")]}))
    fake = _fake_python(tmp_path, "import sys; print('Cannot allocate memory'); sys.exit(1)")
    proc = subprocess.run([sys.executable, "-m", "cli", "serve", "--python", fake, "--port",
                           str(_port())], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "does not fit in memory" in proc.stderr


def test_serve_dry_run_prints_a_command_that_pastes_into_a_shell(tmp_path: Path,
                                                                  abhed_home: Path) -> None:
    # The bug: the command was joined with blanks, so --structured-outputs-config's JSON
    # split into several words when pasted.
    import shlex

    e = _entry(tmp_path).model_copy(update={"extra_args": (
        "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}')})
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [e.model_dump(mode="json")]}))
    port = str(_port())
    proc = subprocess.run([sys.executable, "-m", "cli", "serve", "--dry-run", "--python",
                           sys.executable, "--port", port], check=False, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(proc.stdout)
    assert argv == VllmServer(e, log_path=tmp_path / "l", python=sys.executable, port=int(port),
                              base_dir=abhed_home).command()
    assert argv[-1] == '{"backend": "xgrammar", "disable_any_whitespace": true}'


def test_serve_with_a_python_that_has_no_vllm_says_where_the_checkouts_vllm_is(
        tmp_path: Path, abhed_home: Path) -> None:
    # The bug: `.venv/bin/abhed serve` on a development checkout said "this Python has no
    # vLLM" and nothing said where the demo's vLLM lives.
    e = _entry(tmp_path)
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [e.model_dump(mode="json")]}))
    fake = _fake_python(tmp_path, "import sys; print(\"ModuleNotFoundError: No module named "
                                  "'vllm'\"); sys.exit(1)")
    cache = tmp_path / "cache"

    def serve() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cli", "serve", "--python", fake,
                               "--port", str(_port())], check=False, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "ABHED_CACHE": str(cache)})

    proc = serve()
    assert proc.returncode == 1 and f"{fake} has no vLLM" in proc.stderr
    assert "`scripts/vllm-env` builds vLLM's CPU build" in proc.stderr
    assert f"serve.vllm_python to it in {abhed_home / 'config.json'}" in proc.stderr
    venv = cache / "vllm-cpu-py3.11-0123456789abcdef"
    venv.mkdir(parents=True)
    (venv / ".complete").touch()
    proc = serve()
    assert proc.returncode == 1
    assert f"`abhed serve --python {venv / 'bin' / 'python'}`" in proc.stderr


def test_a_killed_abhed_serve_takes_its_vllm_with_it(tmp_path: Path, abhed_home: Path) -> None:
    """The bug: vLLM runs in a session of its own, so ``abhed serve`` killed outright (no
    handler runs) left it serving for ever, holding its port and its GPU memory."""
    from tests.helpers import wait_for

    e = _entry(tmp_path)
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [e.model_dump(mode="json")]}))
    pid_file = tmp_path / "vllm.pid"
    fake = _fake_python(tmp_path, f"import os; open({str(pid_file)!r}, 'w').write(str(os.getpid()))"
                        + FAKE_VLLM)
    serve = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--python", fake, "--port",
                              str(_port())], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    try:
        assert serve.stdout is not None
        assert serve.stdout.readline().startswith("http://127.0.0.1:")  # serving
        vllm = int(pid_file.read_text())
        os.kill(vllm, 0)
    finally:
        serve.kill()
        serve.wait(30)
        if serve.stdout is not None:
            serve.stdout.close()

    def gone() -> bool:
        try:
            os.kill(vllm, 0)
        except ProcessLookupError:
            return True
        return False

    try:
        wait_for(gone, 30, what=f"vLLM (pid {vllm}) to end with its killed abhed serve")
    finally:
        if not gone():
            os.kill(vllm, 9)
