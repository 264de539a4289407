"""A disk nearly full refuses new work; a disk full refuses the call, which never runs."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
from pathlib import Path

from appliance import events_db_path
from appliance.events.maintenance import verify_log
from tests.appliance.events.logs import ABHED, REPO, Cli, fill


def test_below_the_reserve_new_work_is_refused_with_the_free_space_and_path(
        abhed: Cli, abhed_home: Path, workspace: Path) -> None:
    fill().close()
    (abhed_home / "config.json").write_text(json.dumps({"events": {"reserve_mb": 1 << 40}}))
    before = verify_log(events_db_path()).events
    for argv in (("tool", "glob", '{"pattern": "*"}', "-w", str(workspace)),
                 ("run", "hello", "-w", str(workspace))):
        done = abhed(*argv)
        assert done.returncode == 1, done.stderr
        assert "disk nearly full" in done.stderr and "MiB free" in done.stderr
        assert str(events_db_path()) in done.stderr and "Traceback" not in done.stderr
    assert verify_log(events_db_path()).events == before  # nothing was started or recorded
    # Reading the record is not new work: an auditor can still verify and export.
    assert abhed("events", "verify").returncode == 0
    assert abhed("sessions", "list").returncode == 0


def test_a_hostile_reserve_setting_is_a_config_error(abhed: Cli, abhed_home: Path,
                                                    workspace: Path) -> None:
    (abhed_home / "config.json").write_text(json.dumps({"events": {"reserve_mb": -1}}))
    done = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(workspace))
    assert done.returncode == 2 and "reserve_mb" in done.stderr


def test_a_call_whose_action_cannot_be_recorded_never_runs_and_says_disk_full(
        abhed_home: Path, workspace: Path) -> None:
    fill().close()
    target = workspace / "big.txt"
    args = json.dumps({"path": str(target), "content": "x" * 120_000})

    def file_size_limit() -> None:
        # A full disk for this process: writes past 80 kB fail (EFBIG), as ENOSPC would.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (80_000, 80_000))

    done = subprocess.run([str(ABHED), "tool", "write", args, "-w", str(workspace), "--yes"],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
                          env={**os.environ, "ABHED_HOME": str(abhed_home)},
                          preexec_fn=file_size_limit)
    assert done.returncode == 1, done.stderr
    assert "disk full" in done.stderr and "Nothing was executed" in done.stderr
    assert "Traceback" not in done.stderr
    assert not target.exists()  # the write was never executed
    report = verify_log(events_db_path())
    assert report.ok, report.problems
