"""``abhed doctor``: each area's finding, its fix, and the exit codes 0, 1 and 2.

Real parts: the settings loader, the event log (a real SQLite file, damaged for
real), the sandbox check without a boot, a real HTTP request to a port where
nothing listens, the real ``abhed doctor`` process for the exit codes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.doctor import Report, examine
from models import CatalogEntry, hash_weights


def _doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "doctor", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def _area(report: Report, area: str) -> list[str]:
    return [f"{f.status}: {f.summary} | {f.fix}" for f in report.findings if f.area == area]


def _on_demand(home: Path, tmp_path: Path) -> None:
    w = tmp_path / "weights"
    w.mkdir()
    (w / "config.json").write_text("{}")
    entry = CatalogEntry(name="tiny", served_name="tiny-s", weights_dir=str(w), files=hash_weights(w),
                         tool_call_parser="hermes", max_model_len=2048)
    (home / "catalog.json").write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))
    (home / "config.json").write_text(json.dumps({
        "sandbox": {"backend": "bwrap"},
        "custom_providers": [{"name": "local", "api": "openai", "base_url": "http://localhost/v1",
                              "catalog_entry": "tiny", "start_on_demand": True}]}))


def test_a_fresh_home_says_what_it_is_and_that_a_model_is_missing(abhed_home: Path) -> None:
    report = examine()
    assert report.exit_code == 1
    (settings,) = _area(report, "settings")
    assert "no site layer" in settings and str(abhed_home) in settings
    (model,) = _area(report, "model")
    assert model.startswith("problem: no model provider") and "scripts/demo" in model
    assert str(abhed_home / "config.json") in model
    assert _area(report, "event log") == [f"ok: {abhed_home}/state/events.db: empty (no session yet) | "]
    proc = _doctor()
    assert proc.returncode == 1 and "PROBLEM model" in proc.stdout and "fix: run scripts/demo" in proc.stdout
    assert proc.stdout.rstrip().endswith("doctor: something needs a fix")


def test_an_on_demand_model_not_running_is_well(abhed_home: Path, tmp_path: Path) -> None:
    _on_demand(abhed_home, tmp_path)
    proc = _doctor("--json")
    body = json.loads(proc.stdout)
    model = next(f for f in body["findings"] if f["area"] == "model")
    assert model["status"] == "ok" and "not running: it starts when abhed needs it" in model["summary"]
    assert model["detail"]["socket"] == str(abhed_home / "run" / "tiny.sock")
    catalog = next(f for f in body["findings"] if f["area"] == "catalog")
    assert catalog["status"] == "ok" and "'tiny'" in catalog["summary"]
    assert proc.returncode == body["exit_code"] == 0, proc.stdout


def test_missing_weights_a_dead_endpoint_and_a_bad_file_each_get_a_fix(
        abhed_home: Path, tmp_path: Path) -> None:
    _on_demand(abhed_home, tmp_path)
    (tmp_path / "weights" / "config.json").unlink()
    (tmp_path / "weights").rmdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    config = json.loads((abhed_home / "config.json").read_text())
    config["custom_providers"] = [{"name": "far", "api": "openai", "catalog_entry": "tiny",
                                   "base_url": f"http://127.0.0.1:{port}/v1"}]
    (abhed_home / "config.json").write_text(json.dumps(config))
    report = examine()
    (catalog,) = _area(report, "catalog")
    assert catalog.startswith("problem:") and "missing" in catalog and "weights_dir" in catalog
    (model,) = _area(report, "model")
    assert model.startswith("problem: provider 'far'") and "does not answer" in model
    assert report.exit_code == 1
    (abhed_home / "config.json").write_text("{not json")
    bad = examine()
    assert bad.exit_code == 1 and _area(bad, "settings")[0].startswith("problem:")


def test_a_damaged_event_log_is_a_problem_and_a_check_that_breaks_is_exit_2(
        abhed_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = abhed_home / "state" / "events.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a database" * 100)
    (log,) = _area(examine(), "event log")
    assert log.startswith("problem:") and "abhed events repair" in log

    import appliance.events.maintenance

    def broken(path: Path) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(appliance.events.maintenance, "verify_log", broken)
    report = examine()
    assert report.exit_code == 2 and report.could_not_look == ["event log"]
    assert "could not look" in "\n".join(report.lines())


def test_a_missing_or_hostile_settings_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    missing = examine(tmp_path / "nope.json")
    assert missing.exit_code == 1 and _area(missing, "settings")[0].startswith("problem:")
    huge = tmp_path / "huge.json"
    huge.write_text('{"loop": {"max_turns": ' + "9" * 100_000 + "}}")
    assert examine(huge).exit_code == 1
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"custom_providers": [{"name": "x", "api": "openai",
                                                     "base_url": "http://localhost/v1",
                                                     "start_on_demand": True}]}))
    report = examine(odd)
    assert report.exit_code == 1 and "start_on_demand needs catalog_entry" in _area(report, "settings")[0]
