"""A subagent is built by the session's composition, so it has what its parent has.

Regressions from the long-sessions issue: children never compacted (their
``Limits`` lacked the context length and ``compact_at``), and the extensions'
``system_prompt`` and ``before_send`` hooks governed the parent's requests but
not a child's.  Each test asserts what the child's requests really contained.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from appliance.events import (
    Compacted,
    EventStore,
    PolicyDecision,
    RunEnded,
    RunStarted,
    SessionStarted,
    TaskStarted,
)
from appliance.extensions import ExtensionSpec
from appliance.loop import Limits
from models.scripted import ScriptStep
from tests.appliance.helpers import scripted_agent


def _is_child(body: dict[str, Any]) -> bool:
    return "You are a subagent" in body["messages"][0]["content"]


class Script:
    """The parent's replies in order; each child's from a list, one per request it sends."""

    def __init__(self, parent: list[ScriptStep], child: list[ScriptStep]) -> None:
        self.parent, self.child = list(parent), list(child)
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptStep:
        with self.lock:
            self.bodies.append(body)
            queue = self.child if _is_child(body) else self.parent
            return queue.pop(0) if queue else ScriptStep(text="done")

    def children(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if _is_child(b)]

    def parents(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if not _is_child(b)]


def _call(name: str, **args: Any) -> ScriptStep:
    return ScriptStep(tool_calls=[{"name": name, "arguments": args}])  # type: ignore[list-item]


def _task(prompt: str, **extra: Any) -> ScriptStep:
    return _call("task", prompt=prompt, description="look around", agent_type="explore", **extra)


def _child_events(store: EventStore, parent_id: str) -> tuple[str, list[Any]]:
    [started] = [e.event for e in store.events(parent_id, types=("task_started",))]
    assert isinstance(started, TaskStarted)
    return started.child_session_id, [e.event for e in store.events(started.child_session_id)]


def test_a_child_compacts_against_the_catalogs_context_length(
        workspace: Path, abhed_home: Path) -> None:
    # The context length comes from the catalog entry (as for the parent), compact_at from config.
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [{
        "name": "scripted", "served_name": "scripted", "weights_dir": str(abhed_home),
        "max_model_len": 6000, "sampling": ["temperature", "seed"]}]}))
    files = []
    for n in range(4):
        f = workspace / f"big{n}.txt"
        f.write_text("".join(f"line {i} of file {n} with some padding text\n" for i in range(150)))
        files.append(f)
    script = Script([_task("Read the four big files and say what they hold."),
                     ScriptStep(text="They hold lines.")],
                    [*(_call("read", path=str(f)) for f in files), ScriptStep(text="lines")])
    store = EventStore(workspace.parent / "e.db")
    with scripted_agent(workspace, [], store=store, limits=Limits(compact_at=0.5),
                        provider={"catalog_entry": "scripted"}) as (agent, server, _):
        assert agent.limits.context_tokens == 6000
        server.responder = script
        out = agent.run("go")
        sid = agent.session.id
    assert out.ok
    cid, child = _child_events(store, sid)
    [run] = [e for e in child if isinstance(e, RunStarted)]
    [task] = [e.event for e in store.events(sid, types=("task_started",))]
    assert isinstance(task, TaskStarted)
    # The child's limits: the served model's context and the config's compact_at, bounded by
    # what the parent reserved for it.
    assert run.limits["context_tokens"] == 6000 and run.limits["compact_at"] == 0.5
    assert run.limits["max_turns"] == task.reserved["turns"]
    assert run.limits["max_tokens"] == task.reserved["tokens"]
    compactions = [e for e in child if isinstance(e, Compacted)]
    assert compactions and compactions[0].context_tokens == 6000
    assert compactions[0].tokens_after < compactions[0].tokens_before
    # What the child sent stayed inside the context: four files of ~6,500 characters each would
    # not fit in 6,000 tokens (at the estimator's 3.5 characters a token) without compaction.
    sizes = [len(json.dumps(b["messages"])) for b in script.children()]
    assert sum(f.stat().st_size for f in files) > 6000 * 3.5
    assert max(sizes) < 6000 * 3.5, sizes
    last = json.dumps(script.children()[-1]["messages"])
    assert "was masked" in last or "summary of the earlier conversation" in last
    [ended] = [e for e in child if isinstance(e, RunEnded)]
    assert ended.reason == "done"
    # The child's start records what governed it, as its parent's does.
    [parent_start] = [e.event for e in store.events(sid, types=("session_started",))]
    assert isinstance(child[0], SessionStarted) and isinstance(parent_start, SessionStarted)
    keys = ("site", "site_settings_sha256", "effective_settings_sha256")
    assert [child[0].settings[k] for k in keys] == [parent_start.settings[k] for k in keys]


_EXTENSION = """\
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    e = r["event"]
    if e == "system_prompt":
        out = {"append": "Rule 7: never touch prod."}
    elif e == "before_send":
        out = {"drop": [m["index"] for m in r["messages"] if "DROPME" in (m["content"] or "")]}
    elif e == "tool_call":
        veto = r["tool"] == "read" and "secret" in r["args"].get("path", "")
        out = {"block": True, "reason": "no secrets"} if veto else {}
    elif e == "tool_result":
        out = {"content": r["content"].replace("hunter2", "[gone]")}
    else:
        out = {}
    print(json.dumps(out), flush=True)
"""


def test_every_extension_hook_governs_a_child(workspace: Path, tmp_path: Path) -> None:
    ext = tmp_path / "ext.py"
    ext.write_text(_EXTENSION)
    spec = ExtensionSpec(name="rules", command=sys.executable, args=[str(ext)],
                         events=["system_prompt", "before_send", "tool_call", "tool_result"])
    (workspace / "notes.txt").write_text("the password is hunter2\n")
    (workspace / "secret.txt").write_text("top\n")
    script = Script([_task("Read notes.txt and secret.txt. DROPME"), ScriptStep(text="ok")],
                    [_call("read", path=str(workspace / "notes.txt")),
                     _call("read", path=str(workspace / "secret.txt")), ScriptStep(text="read")])
    store = EventStore(workspace.parent / "e.db")
    with scripted_agent(workspace, [], store=store, extensions=[spec]) as (agent, server, _):
        server.responder = script
        out = agent.run("Look around. DROPME")
        sid = agent.session.id
    assert out.ok
    children, parents = script.children(), script.parents()
    assert len(children) == 3 and parents
    for body in children + parents:
        # system_prompt: the extension's rule is in every agent's prompt, child and parent.
        assert body["messages"][0]["content"].rstrip().endswith("Rule 7: never touch prod.")
        # before_send: a message the extension drops never reaches the model, through a child
        # either (the parent's prompt and the child's task prompt both say DROPME).
        assert not [m for m in body["messages"] if m["role"] == "user" and "DROPME" in m["content"]]
    # tool_result: the child's model read the rewritten result, not the secret.
    sent = json.dumps(children[1]["messages"])
    assert "[gone]" in sent and "hunter2" not in sent
    # tool_call: the extension's veto refused the child's read of secret.txt.
    cid, child = _child_events(store, sid)
    decisions = [e for e in child if isinstance(e, PolicyDecision)]
    assert [d.verdict for d in decisions] == ["allow", "deny"]
    assert decisions[1].decided_by == "extension:rules"
    assert "no secrets" in json.dumps(children[2]["messages"][-1])
