"""install/upgrade as a list of steps: fault points derived from them, undo in reverse.

These run in-process (no frozen binary); test_failures.py fails the real binary at
each point.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from installer._audit import AuditLog
from installer._stage import FAULT_POINTS, STEPS
from installer._txn import Step, Transaction

ROOT = Path(__file__).resolve().parents[2]


def test_fault_points_are_derived_from_the_steps_and_documented() -> None:
    assert FAULT_POINTS == ("verified", "staged", "venv", "pip", "site", "recorded", "units",
                            "gate", "switch", "links", "switched", "state")
    assert len(set(FAULT_POINTS)) == len(FAULT_POINTS)
    doc = (ROOT / "docs/installer.md").read_text()
    listed = doc[doc.index("ABHED_INSTALLER_FAULT=<point>"):].split("A fault can only")[0]
    assert tuple(re.findall(r"`([a-z]+)`", listed)) == FAULT_POINTS


def test_every_fault_point_in_the_code_belongs_to_a_step() -> None:
    called = set()
    for path in (ROOT / "installer").glob("*.py"):
        called.update(re.findall(r'fault_point\("([a-z]+)"\)', path.read_text()))
    fired = {s.after for s in STEPS if s.after}
    assert called | fired == set(FAULT_POINTS)
    for step in STEPS:
        assert step.after is None or step.after in step.faults, step.name


def test_every_step_that_changes_the_host_has_an_undo() -> None:
    undone = {s.name for s in STEPS if s.undo is not None}
    assert {"release", "units", "switch", "links", "state"} <= undone


class _Boom(Exception):
    pass


def _run(tmp_path: Path, steps: tuple[Step[list[str]], ...]) -> tuple[list[str], dict[str, object]]:
    log: list[str] = []
    audit = AuditLog(tmp_path / "audit")
    (tmp_path / "audit").mkdir(exist_ok=True)
    with pytest.raises(_Boom), Transaction(audit, "upgrade", "r1", 2) as tx:
        tx.run(steps, log)
    entries = [e for _, e in audit.entries()]
    return log, entries[-1] if entries else {}


def _step(name: str, *, fail: bool = False, undo_first: bool = False) -> Step[list[str]]:
    def do(log: list[str]) -> None:
        log.append(f"do {name}")
        if fail:
            raise _Boom(name)

    return Step(name, do, lambda log: log.append(f"undo {name}"), undo_first=undo_first)


def test_a_failing_step_undoes_the_steps_before_it_in_reverse(tmp_path: Path) -> None:
    log, entry = _run(tmp_path, (_step("a"), _step("b"), _step("c", fail=True), _step("d")))
    assert log == ["do a", "do b", "do c", "undo b", "undo a"]
    assert entry["step"] == "restore" and entry["undone"] == ["b", "a"]


def test_undo_first_covers_a_step_that_fails_half_way(tmp_path: Path) -> None:
    log, entry = _run(tmp_path, (_step("a"), _step("b", fail=True, undo_first=True)))
    assert log == ["do a", "do b", "undo b", "undo a"]
    assert entry["undone"] == ["b", "a"]


def test_a_label_of_none_means_nothing_to_undo(tmp_path: Path) -> None:
    quiet = Step("q", lambda log: log.append("do q"), lambda log: log.append("undo q"),
                 undo_label=lambda log: None)
    log, entry = _run(tmp_path, (quiet, _step("b", fail=True)))
    assert log == ["do q", "do b"] and entry == {}  # nothing registered: no restore entry


def test_a_fault_after_a_step_undoes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABHED_INSTALLER_FAULT", "here")
    log: list[str] = []
    (tmp_path / "audit").mkdir()
    steps = (Step("a", lambda lg: lg.append("do a"), lambda lg: lg.append("undo a"), after="here"),)
    with pytest.raises(OSError, match="injected fault"), \
            Transaction(AuditLog(tmp_path / "audit"), "upgrade", "r1", 2) as tx:
        tx.run(steps, log)
    assert log == ["do a", "undo a"]


def test_success_commits(tmp_path: Path) -> None:
    log: list[str] = []
    (tmp_path / "audit").mkdir()
    with Transaction(AuditLog(tmp_path / "audit"), "upgrade", "r1", 2) as tx:
        tx.run((_step("a"), _step("b")), log)
    assert log == ["do a", "do b"]
