"""The whole-appliance test's driver: a script run offline beside the installed release.

It starts the release's model server, waits for what proves it ready (``/health``
answered and ``/v1/models`` listing a model, within a deadline) and asks it once.  A
helper module so that the e2e test and the driver's own test share it.
"""

from __future__ import annotations

ASK_DRIVER = r"""
import json, os, signal, subprocess, sys, threading, time, urllib.error, urllib.request
prefix, ws, port = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ, ABHED_MODEL_PORT=port)
server = subprocess.Popen([f"{prefix}/current/run-model-server"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True)
# uvicorn's "Application startup complete" is written before its socket listens, so it
# only says when to start asking: ready is a /health answered 200 and /v1/models listing
# a model, within the deadline (a refused connection just before the listen is retried).
deadline = time.monotonic() + 900
timer = threading.Timer(900, os.killpg, (server.pid, signal.SIGKILL))
timer.start()
started = False
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
    for line in server.stdout:
        log.write(line)
        if b"Application startup complete" in line:
            started = True
            break
    drain = threading.Thread(target=lambda: log.writelines(server.stdout), daemon=True)
    drain.start()
    try:
        ready = started and serving()
        while started and not ready and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            ready = serving()
        timer.cancel()
        assert ready, ("the model server exited, never started or never answered /health and "
                       "/v1/models within 900 s; see logs/e2e-model.log")
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
        timer.cancel()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
        drain.join(10)
"""
