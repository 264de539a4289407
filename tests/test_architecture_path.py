"""docs/architecture.md's path of one call is the real one, measured, not remembered.

A profiler records the files on the call stack whenever the ``read`` tool runs,
the policy engine decides, or an event is written, while ``abhed run`` and the
TUI's link work a prompt that makes one ``read``.  The doc must list exactly
those files, so a newcomer who follows it follows the code.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from appliance.compose import find_site, load_config, read_config, start_agent
from appliance.events import EventStore
from appliance.policy import PolicyEngine
from models.scripted import ScriptedServer
from tools.read import Read

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
OURS = ("cli/", "appliance/", "tools/", "models/", "tui/")

#: Shared by every door: from the loop to the read and its events.
CALL = ["appliance/loop/_agent.py", "appliance/_dispatch.py", "appliance/policy/_gate.py",
        "appliance/policy/_engine.py", "tools/_tool.py", "tools/read.py", "appliance/_session.py",
        "appliance/events/_store.py"]
SETUP = ["appliance/assembly/_config.py", "appliance/assembly/_layers.py",
         "appliance/assembly/_site_layer.py", "appliance/assembly/_tooling.py",
         "appliance/compose/_start.py"]


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
    assert sorted(f for f in rec.path("setup") if f.startswith(("appliance/assembly/", "appliance/compose/"))) == SETUP
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
    assert sorted(f for f in rec.path("setup") if f.startswith(("appliance/assembly/", "appliance/compose/"))) == SETUP
    assert _listed(["tui/_message_box.py", "tui/_link.py"]) == []


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


class Everything:
    """Every file of ours whose functions run (module bodies, i.e. imports, left out), each
    in the tier where it first ran: before the loop's ``Agent.run`` (set-up) or inside it."""

    def __init__(self) -> None:
        self.first: dict[str, str] = {}
        self.running = False
        self.lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "run" and code.co_filename.endswith("appliance/loop/_agent.py"):
            self.running = True
        name = code.co_filename
        if not name.startswith(str(ROOT) + "/") or _defining(frame):
            return
        rel = name[len(str(ROOT)) + 1:]
        if rel.startswith((*OURS, "foundation/")) and rel not in FAKES:
            with self.lock:
                self.first.setdefault(rel, "run" if self.running else "setup")

    def tier(self, which: str) -> set[str]:
        return {f for f, t in self.first.items() if t == which}


def _defining(frame: FrameType) -> bool:
    """Whether ``frame`` only defines things: a module's or a class's body, or a
    comprehension or lambda evaluated in one (a table built at import).  Importing a
    module runs these, but no function of it is called: a newcomer reads them where the
    file's called functions send them, not as a step of the path."""
    if not frame.f_code.co_flags & inspect.CO_NEWLOCALS:
        return True
    back = frame.f_back
    return (frame.f_code.co_name.startswith("<") and back is not None
            and not back.f_code.co_flags & inspect.CO_NEWLOCALS)


#: The test's own model server: it answers in this process, but it is the model's side.
FAKES = ("models/scripted.py",)


def _every_file_section() -> str:
    start = DOC.index("### Every file of ours that runs")
    return DOC[start:DOC.index("\n## ", start)]


def _doc_tier(title: str, until: str | None = None) -> set[str]:
    """The files the doc lists under ``title`` (a bold heading), up to ``until`` or the end."""
    section = _every_file_section()
    part = section[section.index(title):]
    if until is not None:
        part = part[:part.index(until)]
    return set(re.findall(r"`([a-z_/]+\.py)`", part)) - {"models/scripted.py"}


def test_every_function_of_ours_from_abhed_run_to_the_read_is_in_the_doc(
        abhed_home: Path, workspace: Path) -> None:
    # Not a filtered stack: every call event of the run, in every thread, is recorded, and
    # the doc lists exactly the files they ran in, no more (a file that no longer runs) and
    # no fewer (a file a newcomer would meet and not find there).
    # In a fresh interpreter: what an earlier test in this process already ran (a cache
    # filled, a class built) would otherwise not run again, and the list would depend on order.
    code = (
        "import json, sys, threading\n"
        "from tests.test_architecture_path import Everything\n"
        "from cli import main\n"
        "rec = Everything()\n"
        "sys.setprofile(rec); threading.setprofile(rec)\n"
        "try:\n"
        f"    main(['run', 'What does notes.txt say?', '-w', {str(workspace)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "finally:\n"
        "    sys.setprofile(None); threading.setprofile(None)\n"
        "sys.stderr.write('\\n' + json.dumps(rec.first))\n")
    with ScriptedServer(_steps(workspace)) as server:
        _config(abhed_home, workspace, server)
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, check=False,
                              env={**os.environ, "ABHED_HOME": str(abhed_home)})
    assert done.returncode == 0, done.stderr
    rec = Everything()
    rec.first = json.loads(done.stderr.strip().splitlines()[-1])
    assert sorted(rec.tier("setup")) == sorted(_doc_tier("**Set-up**", "**The run**")), "set-up"
    assert sorted(rec.tier("run")) == sorted(_doc_tier("**The run**")), "the run"
