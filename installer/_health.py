"""The health check (operators call it the health gate; ``--skip-gate`` skips it): the
release's own model server and agent must work before it goes live.

1. start the model-server command the release declares, from inside the
   release, on a free port on 127.0.0.1;
2. wait until ``/health`` answers 200 and ``/v1/models`` lists the served
   model (failing at once, with the log's tail, if the server exits), then run the
   declared host check (the release's ``abhed serve --check-host``): served name,
   ``max_model_len``, vLLM version and weights' digest as the site declared;
3. ask the known-answer prompt at temperature 0 and look for the expected text;
4. run the declared agent probe: the release's ``abhed run``, configured by the
   declared ``agent_config`` to use this model server, works in a fresh
   workspace holding ``PROBE-<nonce>.txt``; it must exit 0 and its output
   must show the nonce, which it can only know if the model's tool call really
   ran (the nonce is in no prompt, path or config);
5. the capability probe: the release's ``abhed probe --quick`` against the same
   server, for a new model or serving configuration (``installer._probe``);
6. stop the server's whole process group, remove the gate's scratch space.

Nothing here imports the release's code.  HTTP goes through urllib with
proxies disabled, to loopback only.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation import terminate_group

from ._descriptor import ServeDescriptor, expand, expand_values, find_descriptor, load_descriptor
from ._errors import HealthCheckFailed
from ._layout import Layout
from ._proc import Completed, child_env, run, tail
from ._site_install import release_has_site

__all__ = ["HealthStep", "free_port", "loopback_get", "release_descriptor", "run_agent_check",
           "run_health_check"]

_HOST = "127.0.0.1"


@dataclass(frozen=True)
class HealthStep:
    name: str
    seconds: float
    detail: str
    audit: dict[str, Any] | None = field(default=None, compare=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def loopback_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """GET ``url`` on 127.0.0.1, proxies off: (status, up to 1 MiB of body; empty on an HTTP error)."""
    try:
        with _opener().open(url, timeout=timeout_s) as resp:
            return int(resp.status), bytes(resp.read(1 << 20))
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""


def _post(url: str, body: dict[str, Any], timeout_s: float) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    try:
        with _opener().open(req, timeout=timeout_s) as resp:
            return int(resp.status), bytes(resp.read(4 << 20))
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read(4096))


def release_descriptor(release: Path) -> tuple[ServeDescriptor, Path]:
    path = find_descriptor(release / "bundle")
    if path is None:
        raise HealthCheckFailed(f"release {release.name} declares no model server (no "
                                "models/<name>/abhed-serve.json in its bundle): the health gate cannot "
                                "run; install with --skip-gate (recorded) or get a bundle that declares "
                                "one")
    return load_descriptor(path), path.parent


def _wait_healthy(proc: subprocess.Popen[bytes], base: str, d: ServeDescriptor,
                  log: Path) -> str:
    deadline = time.monotonic() + d.startup_timeout_s
    root = base.removesuffix("/v1")
    last = "no answer yet"
    while True:
        code = proc.poll()
        if code is not None:
            raise HealthCheckFailed(f"the model server exited with code {code} before it was healthy; "
                                    f"last log lines: {_last_lines(tail(log))}. Full log: {log}")
        try:
            status, _ = loopback_get(root + d.health_path, 2.0)
            if status == 200:
                status, body = loopback_get(base + "/models", 5.0)
                ids = [m.get("id") for m in json.loads(body).get("data", [])
                       if isinstance(m, dict)] if status == 200 else []
                if d.served_name in ids:
                    return f"{d.health_path} 200, serving {d.served_name}"
                last = f"/v1/models lists {ids}, not {d.served_name!r}"
            else:
                last = f"{d.health_path} answered {status}"
        except (OSError, ValueError, AttributeError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise HealthCheckFailed(f"the model server was not healthy within {d.startup_timeout_s:g} s "
                                    f"({last}). Log: {log}")
        time.sleep(0.2)


def _last_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()][-n:]
    return " | ".join(lines) or "(empty)"


def _gate_run(argv: list[str], log: Path, env: dict[str, str], timeout_s: float, cwd: Path,
              what: str, why_slow: str = "") -> Completed:
    """One gate step's command, its output in its own fresh ``log``: it must finish
    within ``timeout_s`` (``why_slow`` says what may take the time)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    done = run(argv, log=log, env=env, timeout_s=timeout_s, cwd=cwd)
    if done.timed_out:
        raise HealthCheckFailed(f"{what} did not finish within {timeout_s:g} s{why_slow}. "
                                f"Log: {log}")
    return done


def _agent_probe(argv: list[str], log: Path, env: dict[str, str], timeout_s: float,
                 workspace: Path, nonce: str, whose_model: str) -> None:
    """Run the release's agent probe in ``workspace``: it passes when its output names the
    probe file (``nonce``), which only a tool call that ran could have read.  The gate of
    a model host and of an agent host (``whose_model`` answering) both hold it."""
    done = _gate_run(argv, log, env, timeout_s, workspace, "the agent probe")
    if done.returncode != 0:
        raise HealthCheckFailed(f"the agent probe exited with code {done.returncode}: "
                                f"{_last_lines(done.output)}. Log: {log}")
    if nonce not in log.read_text("utf-8", "replace"):
        raise HealthCheckFailed("the agent probe exited 0 but its output does not show the probe "
                                f"file's name: {whose_model} made no tool call, or the tool did "
                                f"not run. Log: {log}")


def _host_check(argv: list[str], env: dict[str, str], layout: Layout, release: Path,
                timeout_s: float) -> str:
    """The release's own host check (``abhed serve --check-host``, models._host_check):
    the server must serve the declared model, max_model_len, vLLM version and weights
    before the gate asks it anything; its refusal names the field."""
    log = layout.logs / f"gate-{release.name}-host-check.log"
    done = _gate_run(argv, log, env, timeout_s, release, "the host check",
                     " (it hashes the weights)")
    if done.returncode != 0:
        raise HealthCheckFailed(f"the model server does not serve what the site declared: "
                                f"{_last_lines(done.output, 2)}. Nothing was switched. Log: {log}")
    return _last_lines(done.output, 1)


def _known_answer(base: str, d: ServeDescriptor) -> str:
    ka = d.known_answer
    status, body = _post(base + "/chat/completions", {
        "model": d.served_name, "messages": [{"role": "user", "content": ka.prompt}],
        "temperature": 0, "max_tokens": ka.max_tokens, "stream": False}, 600.0)
    if status != 200:
        raise HealthCheckFailed(f"the known-answer prompt got HTTP {status} "
                                f"({body[:300].decode('utf-8', 'replace')})")
    try:
        content = json.loads(body)["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        raise HealthCheckFailed("the known-answer reply is not an OpenAI chat completion: "
                                f"{body[:300].decode('utf-8', 'replace')}") from None
    if ka.expect.lower() not in str(content).lower():
        raise HealthCheckFailed(f"the known-answer prompt {ka.prompt!r} was answered {str(content)[:200]!r}"
                                f", which does not contain {ka.expect!r}: the model or its server is "
                                "broken (wrong weights, wrong chat template)")
    return f"answered {str(content)[:60]!r}"


def _scratch(release: Path) -> Path:
    """A short path of the gate's own (mode 0700), not under the prefix, removed after.

    The agent probe names the probe file to the model, and a small model copies a path
    wrongly: SmolLM2-135M dropped the head of a 110-character one, and at temperature 0
    whether it copies a short one right depends on its characters.  So the path is the
    same on every gate of a release (``/tmp/abhed-gate-<version>``), made by an exclusive
    mkdir (an existing one, or a symbolic link planted there, is never used); only when
    that name is taken does it get a random suffix.
    """
    fixed = Path(tempfile.gettempdir()) / f"abhed-gate-{release.name}"
    try:
        fixed.mkdir(mode=0o700)
        return fixed
    except OSError:
        return Path(tempfile.mkdtemp(prefix=f"abhed-gate-{release.name}-"))


def run_health_check(release: Path, layout: Layout, *, on_step: Callable[[str], None],
                     current: int | None, accept_probe_failure: str | None = None,
                     port: int | None = None) -> list[HealthStep]:
    """Run the health check for ``release``; HealthCheckFailed names the step and what was seen.
    The model server listens on ``port`` (default: a free one).  ``current`` is the host's
    current release, read by the caller: inside the isolated gate ``PREFIX/current`` is the
    release being checked, so the probe would compare it with itself."""
    d, model_dir = release_descriptor(release)
    scratch = _scratch(release)
    home, workspace = scratch / "home", scratch / "ws"
    try:
        return _check(release, layout, d, model_dir, home, workspace, on_step,
                      accept_probe_failure, port, current)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _agent_env(env: dict[str, str], home: Path) -> dict[str, str]:
    """The agent probe's and the capability probe's environment: they share bytecode.

    The release's venv holds none (pip runs with ``--no-compile``, and nothing writes into a
    root-owned release), so each start compiles every module it imports from source: the
    agent and pydantic, httpx and the rest, ~2 s CPU.  Both runs import nearly the same
    modules, so the second reads what the first compiled, in the gate's own scratch
    (``PYTHONPYCACHEPREFIX``; removed with it, never in the release).  The model server
    keeps ``env`` as it is (a vLLM start would write torch's bytecode for nothing).
    """
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(home.parent / "pycache")
    return out


def _probe(release: Path, layout: Layout, d: ServeDescriptor, model_dir: Path, home: Path,
           env: dict[str, str], accept: str | None, sites: bool = False,
           current: int | None = None) -> HealthStep:
    from ._probe import run_probe_step

    t0 = time.monotonic()
    if d.agent_config is None and not sites:
        if not accept:
            raise HealthCheckFailed("the release declares no agent_config, so the capability probe cannot "
                                    "reach the model: nothing was switched. Declare one in abhed-serve.json, "
                                    "or pass --accept-probe-failure REASON (recorded)")
        return HealthStep("capability_probe", 0.0, f"not run (no agent_config); accepted: {accept}",
                        {"result": "failure-accepted", "reason": accept,
                         "problem": "no agent_config: the probe could not run"})
    fresh = home / "probe-home"
    fresh.mkdir()
    if not sites:
        shutil.copyfile(home / "config.json", fresh / "config.json")
    outcome = run_probe_step(
        release, layout, model_dir, probe_argv=[str(release / "venv" / "bin" / "abhed"), "probe", "--quick"],
        env={**env, "ABHED_HOME": str(fresh)}, cwd=fresh, home=fresh, timeout_s=d.probe_timeout_s,
        accept_failure=accept, current=current)
    return HealthStep("capability_probe", time.monotonic() - t0, outcome.detail, outcome.audit)


def _check(release: Path, layout: Layout, d: ServeDescriptor, model_dir: Path, home: Path,
           workspace: Path, on_step: Callable[[str], None],
           accept_probe_failure: str | None = None, port: int | None = None,
           current: int | None = None) -> list[HealthStep]:
    home.mkdir(parents=True)
    workspace.mkdir()
    nonce = secrets.token_hex(12)
    (workspace / f"PROBE-{nonce}.txt").write_text(f"{nonce}\n")
    # The same nonce under a fixed name, for a probe that names the file ({probe_file}) to a
    # model too small to find one: the nonce is still in no prompt, only in the file.
    (workspace / "PROBE.txt").write_text(f"{nonce}\n")
    port = port or free_port()
    base = f"http://{_HOST}:{port}/v1"
    values = {"release": str(release), "venv": str(release / "venv"),
              "python": str(release / "venv/bin/python"), "model_dir": str(model_dir),
              "host": _HOST, "port": str(port), "base_url": base, "served_name": d.served_name,
              "workspace": str(workspace), "data": str(home),
              "probe_file": str(workspace / "PROBE.txt")}
    argv = expand(d.command, values, release=release, what="the model-server command")
    probe = expand(d.agent_probe, values, release=release, what="the agent probe")
    # A release with site settings is checked as engineers get it: the site's settings alone
    # (its provider is this server, on the service's port), nothing of the gate's own, which
    # the agent would refuse as a widening (docs/configuration.md, "What an engineer may change").
    as_engineers = release_has_site(release)
    if d.agent_config is not None and not as_engineers:
        config = expand_values(d.agent_config, values, what="the agent config")
        (home / "config.json").write_text(json.dumps(config, indent=1) + "\n", "utf-8")
    env = child_env({"ABHED_HOME": str(home), **d.env})
    log = layout.logs / f"gate-{release.name}-model.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    steps: list[HealthStep] = []
    t0 = time.monotonic()
    on_step(f"starting the model server ({Path(argv[0]).name} ... on port {port})")
    with log.open("ab") as fh:
        # What ran, first: the log then says which release's server wrote it (no secrets:
        # the API key travels in the environment, never argv).
        fh.write(f"$ {shlex.join(argv)}\n".encode("utf-8", "surrogateescape"))
        fh.flush()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, env=env, cwd=release,
                                    start_new_session=True)
        except OSError as exc:
            raise HealthCheckFailed(f"cannot start the model server {argv[0]}: {exc.strerror}") from None
    try:
        detail = _wait_healthy(proc, base, d, log)
        steps.append(HealthStep("health", time.monotonic() - t0, detail))
        on_step(f"healthy: {detail}")
        if d.host_check is not None:
            t = time.monotonic()
            detail = _host_check(expand(d.host_check, values, release=release,
                                        what="the host check"), env, layout, release,
                                 d.startup_timeout_s)
            steps.append(HealthStep("host_check", time.monotonic() - t, detail))
            on_step(f"host check: {detail}")
        t1 = time.monotonic()
        detail = _known_answer(base, d)
        steps.append(HealthStep("known_answer", time.monotonic() - t1, detail))
        on_step(f"known answer: {detail}")
        t2 = time.monotonic()
        agent_log = layout.logs / f"gate-{release.name}-agent.log"
        agent_env = _agent_env(env, home)
        _agent_probe(probe, agent_log, agent_env, d.agent_timeout_s, workspace, nonce,
                     "the model")
        steps.append(HealthStep("agent_tool_call", time.monotonic() - t2,
                              "the agent's tool call saw the probe file"))
        on_step("agent tool call: ok")
        on_step("capability probe (abhed probe --quick)")
        step = _probe(release, layout, d, model_dir, home, agent_env, accept_probe_failure,
                      as_engineers, current)
        steps.append(step)
        on_step(f"capability probe: {step.detail}")
    finally:
        terminate_group(proc)
    return steps


def _reach(endpoints: tuple[str, ...], timeout_s: float) -> str:
    """Each declared model endpoint accepts a connection (from inside the gate: through its
    relay, ``installer._isolate``); HealthCheckFailed names the first that does not."""
    from bundle import endpoint_address

    for url in endpoints:
        host, port = endpoint_address(url)
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
        except OSError as exc:
            raise HealthCheckFailed(
                f"the site's model endpoint {url} does not answer from this host ({exc}): "
                "install and start the model hosts first (abhed-installer install --role "
                "model there), and check that this host can reach them") from None
    return f"{len(endpoints)} model endpoint(s) answer: {', '.join(endpoints)}"


def _reach_relay(sock: str, timeout_s: float) -> str:
    """The model service answers ``GET /v1/models`` through the gate's relay at ``sock``
    (``installer._gate_relay``); HealthCheckFailed quotes the refusal the relay or the
    front gave (a certificate problem, a revoked host, no front answering)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            conn.connect(sock)
            conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: model-service\r\n"
                         b"Connection: close\r\n\r\n")
            data = b""
            while len(data) < 65536 and (chunk := conn.recv(65536)):
                data += chunk
    except OSError as exc:
        raise HealthCheckFailed(f"the release's model relay on {sock} did not answer ({exc})") \
            from None
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1:2]
    if status != [b"200"]:
        said = body.decode("utf-8", "replace").strip()[:1000]
        raise HealthCheckFailed(f"the site's model service did not answer this host through "
                                f"its relay (status {status[0].decode() if status else '?'}): "
                                f"{said}")
    return f"the site's model service answers through the release's model relay on {sock}"


def run_agent_check(release: Path, layout: Layout, endpoints: tuple[str, ...], *,
                    on_step: Callable[[str], None],
                    relay: str | None = None) -> list[HealthStep]:
    """The gate of an agent host (role agent: no model server of its own): the release's
    ``abhed run``, with the site's settings alone (as engineers get them, so its provider
    is the site's model service), must make a tool call that finds the probe file.

    Called inside ``installer._isolate.isolated`` with ``endpoints``: the network reaches
    the declared model endpoints and nothing else.  With ``relay`` (the socket of the
    gate's own relay, ``installer._gate_relay``) the settings' provider goes through it.  The known-answer prompt and the
    capability probe are the model host's gate's (it serves the model this one asks).
    """
    d, model_dir = release_descriptor(release)
    scratch = _scratch(release)
    home, workspace = scratch / "home", scratch / "ws"
    try:
        home.mkdir(parents=True)
        workspace.mkdir()
        nonce = secrets.token_hex(12)
        (workspace / f"PROBE-{nonce}.txt").write_text(f"{nonce}\n")
        (workspace / "PROBE.txt").write_text(f"{nonce}\n")
        values = {"release": str(release), "venv": str(release / "venv"),
                  "python": str(release / "venv/bin/python"), "model_dir": str(model_dir),
                  "host": _HOST, "port": "0", "base_url": endpoints[0] if endpoints else "",
                  "served_name": d.served_name, "workspace": str(workspace), "data": str(home),
                  "probe_file": str(workspace / "PROBE.txt")}
        probe = expand(d.agent_probe, values, release=release, what="the agent probe")
        steps: list[HealthStep] = []
        t0 = time.monotonic()
        # Through the gate's relay (``relay``) as engineers reach it, else straight to the
        # endpoints as the settings' provider dials them.
        detail = _reach_relay(relay, 30.0) if relay else _reach(endpoints, 10.0)
        steps.append(HealthStep("model_endpoints", time.monotonic() - t0, detail))
        on_step(detail)
        t1 = time.monotonic()
        agent_log = layout.logs / f"gate-{release.name}-agent.log"
        _agent_probe(probe, agent_log, child_env({"ABHED_HOME": str(home)}), d.agent_timeout_s,
                     workspace, nonce, "the site's model")
        steps.append(HealthStep("agent_tool_call", time.monotonic() - t1,
                                "the agent's tool call, answered by the site's model service, "
                                "saw the probe file"))
        on_step("agent tool call through the site's model service: ok")
        return steps
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
