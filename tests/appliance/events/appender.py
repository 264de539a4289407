"""A child process for the fault tests: append events, report each one after it is committed.

    python appender.py DB REPORT COUNT [NORMAL|FULL]

Each committed event is reported as a line ``seq hash`` in REPORT (flushed,
so a SIGKILL loses no report of a commit that returned).  A refused append
prints the error's message as the last line of stderr and exits 3.
"""

from __future__ import annotations

import sys
from pathlib import Path

from appliance import Session
from appliance._errors import AbhedError
from appliance.events import ActionEvent, EventStore


def main() -> int:
    db, report, count = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    sync = sys.argv[4] if len(sys.argv) > 4 else "NORMAL"
    try:
        store = EventStore(db, synchronous=sync)
        session = Session.create(store, "/w", version="fault")
        with report.open("a", buffering=1) as out:
            for i in range(count):
                stored = session.append(ActionEvent(session_id=session.id, call_id=f"c{i}",
                                                    tool="glob", args={"pattern": "*" * (i % 50)}))
                out.write(f"{stored.seq} {stored.hash}\n")
        store.close()
    except AbhedError as exc:
        print(str(exc), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
