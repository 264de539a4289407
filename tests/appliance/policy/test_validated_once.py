"""A call's arguments are validated once, by the gate; the precheck and the runner reuse them.

Before: the gate validated, the precheck validated again before an approval, and
``run_tool`` validated a third time.  Each refusal those checks gave must still come.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from appliance import events_db_path
from appliance.events import EventStore
from appliance.policy import Approval, ScriptedApprover
from tests.appliance.helpers import tooling
from tools.write import WriteArgs


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every validation of ``write``'s arguments, whoever asks for it."""
    seen: list[Any] = []
    real = WriteArgs.model_validate.__func__  # type: ignore[attr-defined]

    def validate(cls: type[WriteArgs], obj: Any, *args: Any, **kw: Any) -> WriteArgs:
        seen.append(obj)
        return real(cls, obj, *args, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(WriteArgs, "model_validate", classmethod(validate))
    return seen


def test_an_approved_ask_validates_once(workspace: Path, counted: list[Any]) -> None:
    approver = ScriptedApprover([Approval("allow", "test", "yes")])
    d = tooling(EventStore(events_db_path()), workspace, approver=approver,
                policy={"mode": "ask"}).dispatcher
    result = d.call("write", {"path": str(workspace / "a.txt"), "content": "x\n"})
    assert result.ok, result.content
    assert len(approver.requests) == 1  # it was an ask, and a person allowed it
    assert len(counted) == 1 and (workspace / "a.txt").read_text() == "x\n"


def test_an_allowed_call_validates_once(workspace: Path, counted: list[Any]) -> None:
    d = tooling(EventStore(events_db_path()), workspace, policy={"mode": "auto"}).dispatcher
    assert d.call("write", {"path": str(workspace / "a.txt"), "content": "x\n"}).ok
    assert len(counted) == 1


def test_the_refusals_still_come(workspace: Path) -> None:
    approver = ScriptedApprover([Approval("allow", "test", "yes")])
    d = tooling(EventStore(events_db_path()), workspace, approver=approver,
                policy={"mode": "ask"}).dispatcher
    invalid = d.call("write", {"path": str(workspace / "a.txt")})
    assert invalid.error is not None and invalid.error.code == "invalid_arguments"
    assert "`content` is required" in invalid.content
    relative = d.call("write", {"path": "a.txt", "content": "x"})
    assert relative.error is not None and relative.error.code == "relative_path"
    (workspace / "b.txt").write_text("old\n")
    # Certain to fail (not read first): refused by the precheck, nobody is asked.
    unseen = d.call("write", {"path": str(workspace / "b.txt"), "content": "new\n"})
    assert unseen.error is not None and unseen.error.code == "not_read"
    assert approver.requests == [] and (workspace / "b.txt").read_text() == "old\n"
