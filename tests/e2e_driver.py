"""The whole-appliance test's driver: a script run offline beside the installed release.

It starts the release's model server, polls for what proves it ready (``/health``
answered and ``/v1/models`` listing a model, within a deadline; no log line is waited
on) and asks it once.  A helper module so that the e2e test and the driver's own test
share it.
"""

from __future__ import annotations

ASK_DRIVER = r"""
import json, os, signal, subprocess, sys, time, urllib.error, urllib.request
prefix, ws, port = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ, ABHED_MODEL_PORT=port)
# Ready is a /health answered 200 and /v1/models listing a model, polled within the deadline;
# no log line is waited on (uvicorn's "Application startup complete" is written before its
# socket listens, and a server that dies is seen by poll(), not by a line that never comes).
deadline = time.monotonic() + 900
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def serving() -> bool:
    try:
        with opener.open(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            if r.status != 200:
                return False
        with opener.open(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            return bool(json.loads(r.read()).get("data"))
    except (OSError, ValueError):  # refused, reset, not yet JSON: not ready yet
        return False


with open(f"{prefix}/logs/e2e-model.log", "ab") as log:
    server = subprocess.Popen([f"{prefix}/current/run-model-server"], env=env, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              start_new_session=True)
try:
    ready = serving()
    while not ready and server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        ready = serving()
    assert ready, ("the model server exited, or never answered /health and /v1/models "
                   "within 900 s; see logs/e2e-model.log")
    # Up to three sessions: greedy SmolLM2 still sometimes mangles the path it is shown
    # (drops the leading "/", repeats a component); the appliance is what is tested here,
    # and an answer in any session proves the whole path from engineer to model and back.
    for attempt in range(3):
        run = subprocess.run([f"{prefix}/bin/abhed", "run", "--workspace", ws, "--force-tool",
                              "read", f"What is the project's code name? It is written in "
                              f"`{ws}/notes.txt`."], capture_output=True, text=True,
                             timeout=900)
        if run.returncode != 0 or "BLUE HERON" in run.stdout.upper():
            break
    show = subprocess.run([f"{prefix}/bin/abhed", "config", "show", "policy"],
                          capture_output=True, text=True, timeout=120)
    print(json.dumps({"rc": run.returncode, "stdout": run.stdout, "stderr": run.stderr[-4000:],
                      "show": show.stdout + show.stderr, "attempts": attempt + 1}))
finally:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
"""
