"""One real vLLM (CPU build) for every slow test and benchmark, started through `abhed serve`.

The first test that needs it pays for it: the cached vLLM venv
(``scripts/vllm-env``), the tiny model (``tests/models/tiny_model.py``, cached
by the script's digest), and one ``abhed serve`` subprocess on a free
127.0.0.1 port.  Nothing is skipped: if vLLM cannot be installed or started,
the tests that need it fail, saying why.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from models import CatalogEntry, hash_weights

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("ABHED_CACHE", Path.home() / ".cache" / "abhed"))
SERVED = "tiny"
# What makes random weights produce schema-valid calls (see tiny_model.py).
VLLM_ENV = {"VLLM_ENFORCE_STRICT_TOOL_CALLING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
VLLM_ARGS = ["--enforce-eager", "--structured-outputs-config",
             '{"backend":"xgrammar","disable_any_whitespace":true}']
HONOURED = ["temperature", "top_p", "top_k", "seed", "max_tokens"]


def vllm_python() -> str:
    proc = subprocess.run([str(ROOT / "scripts" / "vllm-env")], check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/vllm-env failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _cached_model(name: str, scripts: list[Path], salt: str, argv: list[str]) -> Path:
    """A model directory made once per machine by ``argv`` + its output folder, cached
    under ``name``, keyed by the scripts that make it and ``salt``; a half-made one (no
    ``.complete``) is made again."""
    key = hashlib.sha256(b"".join(p.read_bytes() for p in scripts) + salt.encode()).hexdigest()[:16]
    target = CACHE / f"{name}-{key}"
    if not (target / ".complete").exists():
        tmp = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=CACHE))
        proc = subprocess.run([*argv, str(tmp / "m")], check=False, capture_output=True,
                              text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"making the {name} failed:\n{proc.stderr[-4000:]}")
        (tmp / "m" / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        (tmp / "m").rename(target)
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def tiny_model(python: str) -> Path:
    """The tests' tiny random-weight model (tests/models/tiny_model.py)."""
    script = ROOT / "tests" / "models" / "tiny_model.py"
    return _cached_model("tiny-model", [script], python, [python, str(script)])


def wired_model(python: str) -> Path:
    """The tiny model re-wired so that real vLLM passes an installer's health gate
    (tests/installer/wired_model.py: ``5`` in free text, ``glob {"pattern": "*"}`` under a
    named tool choice), made once per machine beside the tiny model, keyed by both."""
    script = ROOT / "tests" / "installer" / "wired_model.py"
    tiny = tiny_model(python)
    return _cached_model("wired-model", [script], str(tiny), [python, str(script), str(tiny)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RealVllm:
    base_url: str
    home: Path
    proc: subprocess.Popen[str]
    entry: CatalogEntry
    python: str
    output: list[str]

    def vllm_pid(self) -> int | None:
        """The vLLM server process (the child `abhed serve` started)."""
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                return int(stat.parent.name)
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None


_lock = threading.Lock()
_server: RealVllm | None = None


def entry_for(weights: Path) -> CatalogEntry:
    files = {k: v for k, v in hash_weights(weights).items() if k != ".complete"}
    return CatalogEntry(name="tiny", served_name=SERVED, weights_dir=str(weights), files=files,
                        chat_template="chat_template.jinja", tool_call_parser="hermes",
                        max_model_len=8192, dtype="float32", sampling=tuple(HONOURED),
                        extra_args=tuple(VLLM_ARGS))


def write_home(home: Path, python: str, entry: CatalogEntry, port: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "catalog.json").write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))
    (home / "config.json").write_text(json.dumps({"serve": {
        "vllm_python": python, "port": port, "env": VLLM_ENV, "startup_timeout_s": 900}}))


def served_url(proc: subprocess.Popen[str], home: Path, where: str = "") -> tuple[str, list[str]]:
    """The URL ``abhed serve`` (``proc``, with ``home`` its ABHED_HOME) prints once vLLM
    answers, and the list its stderr is read into as it runs (on a thread of its own, so
    that a full pipe never stalls it).  One that ends without a URL raises, with its stderr
    and the end of vLLM's log; ``where`` (" on model-1") says which host's it was."""
    assert proc.stdout is not None and proc.stderr is not None
    stderr = proc.stderr
    output: list[str] = []
    threading.Thread(target=lambda: output.extend(stderr), daemon=True).start()
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.wait(60)
        log = home / "logs" / "vllm-tiny.log"
        tail = log.read_text()[-4000:] if log.exists() else ""
        raise RuntimeError(f"abhed serve did not start vLLM{where}: {''.join(output)[-2000:]}\n"
                           f"{tail}")
    return url, output


def shared_vllm() -> RealVllm:
    """Start (once) or return the session's real vLLM, served by `abhed serve`."""
    global _server
    with _lock:
        if _server is not None and _server.alive():
            return _server
        python = vllm_python()
        entry = entry_for(tiny_model(python))
        home = Path(tempfile.mkdtemp(prefix="abhed-vllm-home-"))
        port = free_port()
        write_home(home, python, entry, port)
        env = {**os.environ, "ABHED_HOME": str(home)}
        proc = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--model", "tiny"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        url, output = served_url(proc, home)
        _server = RealVllm(url, home, proc, entry, python, output)
        atexit.register(stop, _server)
        return _server


# A test that runs a benchmark in a child process hands it the suite's server here, so the
# child does not start (and wait a minute for) a second vLLM beside it.
URL_ENV = "ABHED_TEST_VLLM_URL"


def vllm_base_url() -> str:
    """The server this process was handed (``URL_ENV``), else :func:`shared_vllm`'s."""
    return os.environ.get(URL_ENV) or shared_vllm().base_url


def stop(server: RealVllm) -> int | None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(60)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(10)
    for pipe in (server.proc.stdout, server.proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
    return server.proc.returncode
