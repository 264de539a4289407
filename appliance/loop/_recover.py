"""Close a run a crash left open, recording what actually happened to its calls.

A process that died mid-run (power cut, kill -9) leaves a ``run_started``
with no ``run_ended``, and maybe an ``action`` with no ``observation``.  Such
a call was started, so its outcome is unknown; this records an observation
saying so, reconciled where that is possible: for ``write`` and ``edit`` the
file's current hash is compared with the hash the session last saw, so the
model is told whether the change is there.  ``bash`` cannot be reconciled;
the model is told plainly that it may have run.  A ``task`` call is
reconciled from its subagent's own events: the subagent's unfinished run is
recovered and ended the same way, its ``task_ended`` recorded, and the model
is told which files the subagent changed and which commands it ran.  Then
the run is ended (``interrupted``), so the log never holds an open run twice.
"""

from __future__ import annotations

import os

from appliance._session import Session
from appliance.events import RunEnded, TaskEnded, TaskStarted
from appliance.loop._history import History
from appliance.sessions import effects_of
from foundation import digest_file
from tools import failure

__all__ = ["recover_interrupted_run"]


def _file_sha256(path: str) -> str | None:
    try:
        return digest_file(path).sha256
    except OSError:  # gone, or no longer a regular file: not what this session wrote
        return None


def _reconcile(session: Session, tool: str, args: object) -> tuple[str, dict[str, object]]:
    path = args.get("path") if isinstance(args, dict) else None
    if tool in ("write", "edit") and isinstance(path, str) and os.path.isabs(path):
        seen = session.seen_hash(path)
        now = _file_sha256(path)
        facts: dict[str, object] = {"path": path, "sha256_seen": seen, "sha256_now": now}
        if now is not None and now == seen:
            return (f"{path} is exactly as this session last saw it: the {tool} was NOT applied. "
                    "You may make it again."), facts
        if now is None:
            return (f"{path} does not exist now" + (" (it did before)" if seen else "")
                    + f": the {tool} was not applied as a new file. Check before retrying."), facts
        return (f"{path} differs from what this session last saw: the {tool} was probably applied "
                "(or someone else changed the file). Read it before changing it again."), facts
    if tool == "bash":
        return ("The command may have run, partly or completely: check its effects (files, "
                "processes) before running it again."), {}
    return "It may or may not have taken effect; check before repeating it.", {}


def _reconcile_task(session: Session, call_id: str) -> tuple[str, dict[str, object]]:
    """What a crashed task call's subagent did, from its own events; its open run is ended."""
    started = [e.event for e in session.store.events(session.id, types=("task_started",))
               if isinstance(e.event, TaskStarted) and e.event.call_id == call_id]
    if not started:
        return "Its subagent was never started, so nothing was done for it.", {}
    child_id = started[-1].child_session_id
    child = Session.open(session.store, child_id)
    try:
        recover_interrupted_run(child, History.rebuild(session.store.events(child_id), ""))
    finally:
        child.release()
    effects = effects_of(session.store, child_id)
    session.append(TaskEnded(session_id=session.id, call_id=call_id, child_session_id=child_id,
                             status="interrupted", files_changed=effects.files,
                             commands=effects.commands,
                             spent={"turns": effects.turns, "tokens": effects.tokens}))
    text = " ".join([f"Its subagent (session {child_id}) was stopped with Abhed after "
                     f"{effects.turns} model turns; its run is now ended. Its events show:",
                     *effects.lines(),
                     "Check those files before redoing the subtask; what it finished is kept."])
    return text, {"child_session_id": child_id, "files_changed": effects.files,
                  "commands": effects.commands}


def recover_interrupted_run(session: Session, history: History) -> None:
    """Record outcomes for a crashed run's started calls, then end that run."""
    run_id = history.open_run
    if run_id is None:
        return
    for action in history.dangling():
        what, facts = (_reconcile_task(session, action.call_id) if action.tool == "task"
                       else _reconcile(session, action.tool, action.args))
        session.record_result(action.call_id, action.tool, failure(
            "outcome_unknown",
            f"Outcome unknown: this {action.tool} call was started, but Abhed stopped before its "
            f"result was recorded. {what}", details={"reconciled": facts}), 0.0)
    session.append(RunEnded(session_id=session.id, run_id=run_id, reason="interrupted",
                            message="the process stopped during this run (found when the session "
                            "was resumed); calls that did not finish are marked outcome unknown",
                            turns=0))
