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

from appliance.events import verify_log
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
