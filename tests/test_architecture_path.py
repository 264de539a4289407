"""docs/architecture.md's path of one call is the real one, measured, not remembered.

A profiler records the files on the call stack whenever the ``read`` tool runs,
the policy engine decides, or an event is written, while ``abhed run`` and the
TUI's link work a prompt that makes one ``read``.  The doc must list exactly
those files, so a newcomer who follows it follows the code.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from appliance.compose import find_site, load_config, read_config, start_agent
from appliance.events import EventStore
from appliance.policy import PolicyEngine
from models import ScriptedServer
from tools.read import Read

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
OURS = ("cli/", "appliance/", "tools/", "models/", "tui/")

#: Shared by every door: from the loop to the read and its events.
CALL = ["appliance/loop/_agent.py", "appliance/_dispatch.py", "appliance/policy/_gate.py",
        "appliance/policy/_engine.py", "tools/_tool.py", "tools/read.py", "appliance/_session.py",
        "appliance/events/_store.py"]
SETUP = ["appliance/compose/_config.py", "appliance/compose/_layers.py",
         "appliance/compose/_site.py", "appliance/compose/_start.py",
         "appliance/compose/_tooling.py"]


class Recorder:
    """Files on the stack at each call of the watched functions, in order of first appearance."""

    def __init__(self, watched: dict[CodeType, Callable[[FrameType], str | None]]) -> None:
        self.watched = watched
        self.files: dict[str, list[str]] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code not in self.watched:
            return
        label = self.watched[frame.f_code](frame)
        if label is None:
            return
        chain: list[str] = []
        f: FrameType | None = frame
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith(str(ROOT) + "/"):
                rel = name[len(str(ROOT)) + 1:]
                if rel.startswith(OURS) and rel not in chain:
                    chain.append(rel)
            f = f.f_back
        seen = self.files.setdefault(label, [])
        seen += [x for x in reversed(chain) if x not in seen]

    def path(self, label: str) -> list[str]:
        return self.files.get(label, [])


def _event_kind(frame: FrameType) -> str | None:
    kind = getattr(frame.f_locals.get("event"), "type", None)
    return "call" if kind in ("action", "policy_decision", "observation") else "setup"


def _config(home: Path, workspace: Path, server: ScriptedServer) -> None:
    (workspace / "notes.txt").write_text("42\n")
    (home / "config.json").write_text(json.dumps({"custom_providers": [{
        "name": "s", "api": "openai", "base_url": server.base_url, "model": "scripted",
        "max_retries": 0}], "sandbox": {"backend": "host"}}))


def _steps(workspace: Path) -> list[dict[str, Any]]:
    return [{"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "notes.txt")}}]},
            {"text": "It says 42."}]


def _listed(files: list[str]) -> list[str]:
    return [f for f in files if f"`{f}`" not in DOC]


def test_abhed_run_to_a_read_and_its_events(abhed_home: Path, workspace: Path) -> None:
    from cli import main

    with ScriptedServer(_steps(workspace)) as server:
        _config(abhed_home, workspace, server)
        rec, code = _profiled(lambda: main(["run", "What does notes.txt say?", "-w", str(workspace)]))
        assert code == 0
    assert sorted(rec.path("call")) == sorted(["cli/__init__.py", "cli/run.py", *CALL]), rec.path("call")
    assert sorted(f for f in rec.path("setup") if f.startswith("appliance/compose/")) == SETUP
    assert _listed(["cli/run.py", *CALL, *SETUP]) == []


def test_a_tui_prompt_to_a_read_and_its_events(abhed_home: Path, workspace: Path) -> None:
    from tui import AgentLink

    class Sink:
        def __init__(self) -> None:
            self.up, self.over = threading.Event(), threading.Event()

        def started(self, info: Any) -> None:
            self.up.set()

        def run_ended(self, outcome: Any, error: str | None) -> None:
            self.over.set()

        def failed(self, message: str) -> None:
            raise AssertionError(message)

        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *args, **kw: None  # the rest of the Sink protocol: nothing to show

    with ScriptedServer(_steps(workspace)) as server:
        _config(abhed_home, workspace, server)
        sink = Sink()
        link = AgentLink(None, None, workspace, sink)  # type: ignore[arg-type]

        def work() -> None:
            link.start()
            assert sink.up.wait(30)
            assert link.submit("What does notes.txt say?")
            assert sink.over.wait(30)

        try:
            rec, _ = _profiled(work)
        finally:
            link.close()
    assert sorted(rec.path("call")) == sorted(["tui/_link.py", *CALL]), rec.path("call")
    assert sorted(f for f in rec.path("setup") if f.startswith("appliance/compose/")) == SETUP
    assert _listed(["tui/_app.py", "tui/_link.py"]) == []


def _profiled(fn: Callable[[], Any]) -> tuple[Recorder, Any]:
    """Run ``fn`` under the recorder (its exit code, if it exits)."""
    code = None
    rec = Recorder({Read.run.__code__: lambda f: "call",
                    PolicyEngine.decide.__code__: lambda f: "call",
                    EventStore.append.__code__: _event_kind,
                    load_config.__code__: lambda f: "setup",
                    read_config.__code__: lambda f: "setup",
                    find_site.__code__: lambda f: "setup",
                    start_agent.__code__: lambda f: "setup"})
    sys.setprofile(rec)
    threading.setprofile(rec)
    try:
        fn()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return rec, code


def test_the_docs_arrows_are_the_ones_the_boundaries_test_holds() -> None:
    from tests.test_boundaries import ALLOWED, EXCEPTIONS

    table = DOC[DOC.index("## Packages and their arrows"):DOC.index("## From a prompt")]
    edges = {(a, b) for a, targets in ALLOWED.items() for b in targets}
    edges |= {(module.split(".")[0], b) for module, b in EXCEPTIONS}
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `")]
    missing = [f"{a} -> {b}" for a, b in sorted(edges)
               if not [r for r in rows if f"`{a}`" in r[0] and f"`{b}`" in r[0] + r[1]]]
    assert missing == [], "docs/architecture.md's arrow table lacks these"
    # Each exception is named by its module, so a second module crossing the same arrow
    # (bundle/_build.py beside bundle/_gather.py) cannot hide behind the first one's row.
    unnamed = [module for module, _ in EXCEPTIONS
               if f"`{module.replace('.', '/')}.py`" not in table]
    assert unnamed == [], "docs/architecture.md's arrow table does not name these exceptions"
