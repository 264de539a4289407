"""Several processes opening one fresh event log at the same moment.

Regression: two `abhed run`s starting together on a new ABHED_HOME made the
second see the first's half-made file (no tables yet) and refuse the log as
damaged.  The log must come into being whole, so every opener either creates
it or finds it complete.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from appliance.events.maintenance import verify_log
from tests.helpers import wait_for

# Each child imports everything first, says it is ready, then spins until the
# go file appears, so the opens land within microseconds of each other.
CHILD = """
import os, sys
from pathlib import Path
from appliance import Session
from appliance._errors import AbhedError
from appliance.events import ActionEvent, EventStore
db, go, ready = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
ready.touch()
while not os.path.exists(go):
    pass
try:
    store = EventStore(db)
    session = Session.create(store, "/w", version="race")
    session.append(ActionEvent(session_id=session.id, call_id="c", tool="glob",
                               args={"pattern": "*"}))
    store.close()
except AbhedError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
"""


def test_processes_creating_one_fresh_log_at_once_all_succeed(tmp_path: Path) -> None:
    for round_no in range(5):
        base = tmp_path / f"round{round_no}"
        base.mkdir()
        db, go = base / "home" / "events.db", base / "go"
        db.parent.mkdir()
        ready = [base / f"ready{i}" for i in range(4)]
        procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(go), str(r)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for r in ready]
        wait_for(lambda ready=ready: all(r.exists() for r in ready), timeout_s=120)
        go.touch()
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * len(procs), errors
        report = verify_log(db)
        assert report.ok, report


def test_threads_creating_sessions_while_others_append_share_one_store(tmp_path: Path) -> None:
    # Regression: concurrent subagents share their parent's store; a child's
    # create_session (then through sqlite_utils, which issued its own BEGIN) raced a sibling's append
    # and failed with "cannot start a transaction within a transaction".
    import threading

    from appliance import Session
    from appliance.events import ActionEvent, EventStore

    store = EventStore(tmp_path / "events.db")
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def worker(n: int) -> None:
        try:
            start.wait(timeout=60)
            for i in range(30):
                session = Session.create(store, "/w", version=f"t{n}-{i}")
                session.append(ActionEvent(session_id=session.id, call_id="c", tool="glob",
                                           args={"pattern": "*"}))
        except BaseException as exc:  # recorded, then asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert not errors, errors
        store.verify()
        assert len(store.sessions()) == 180
    finally:
        store.close()
