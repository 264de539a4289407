"""``abhed sessions list|show|undo``: ``show`` prints the conversation, not only the calls."""

from __future__ import annotations

import json

import click

from appliance._errors import SessionNotFound
from appliance.cli._common import open_store
from appliance.events import (
    ActionEvent,
    Compacted,
    ModelTurn,
    ObservationEvent,
    PlanUpdated,
    RunEnded,
    RunStarted,
    SessionEnded,
    SessionStarted,
    TaskEnded,
    TaskStarted,
    TodoUpdated,
    UndoApplied,
    UserMessage,
)


def _indent(text: str, limit: int = 2000) -> str:
    body = text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"
    return "\n".join("         " + line for line in body.splitlines())


@click.group()
def sessions() -> None:
    """List, show (the conversation) or undo sessions."""


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_sessions(as_json: bool) -> None:
    """Every session in the event log, oldest first."""
    store = open_store()
    rows = store.sessions()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no sessions recorded yet")
        return
    click.echo(f"{'SESSION':<28} {'CREATED':<28} {'EVENTS':>6}  WORKSPACE")
    for r in rows:
        click.echo(f"{r['id']:<28} {r['created_at']:<28} {r['events']:>6}  {r['workspace']}")


@sessions.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print every event as JSON lines.")
def show_session(session_id: str, as_json: bool) -> None:
    """The conversation of one session: prompts, answers, calls, results, todo, plan, tasks."""
    store = open_store()
    try:
        info = store.session_info(session_id)
    except SessionNotFound as exc:
        raise click.ClickException(str(exc)) from None
    events = list(store.events(session_id))
    if as_json:
        for stored in events:
            line = stored.event.model_dump(mode="json")
            line.update(seq=stored.seq, session_seq=stored.session_seq, hash=stored.hash)
            click.echo(json.dumps(line, ensure_ascii=False))
        return
    click.echo(f"session {info['id']}  workspace {info['workspace']}  created {info['created_at']}")
    for stored in events:
        ev = stored.event
        head = f"#{stored.session_seq:<4} {ev.ts}  "
        if isinstance(ev, SessionStarted):
            parent = (f", subagent of {ev.parent_session_id} call {ev.parent_call_id}"
                      if ev.parent_session_id else "")
            click.echo(head + f"started (abhed {ev.abhed_version}{parent})")
        elif isinstance(ev, RunStarted):
            click.echo(head + f"run    {ev.run_id} {ev.model} mode {ev.mode}"
                       + (" (resumed)" if ev.resumed else ""))
        elif isinstance(ev, UserMessage):
            click.echo(head + f"{'steer' if ev.kind == 'steer' else 'user'}:\n" + _indent(ev.text))
        elif isinstance(ev, ModelTurn):
            if ev.text.strip():
                click.echo(head + "model:\n" + _indent(ev.text))
        elif isinstance(ev, RunEnded):
            click.echo(head + f"end    {ev.run_id} {ev.reason}: {ev.message}")
        elif isinstance(ev, TodoUpdated):
            marks = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}
            click.echo(head + "todo:\n" + _indent("\n".join(
                f"{marks[i.status]} {i.id}: {i.content}" for i in ev.items) or "(empty)"))
        elif isinstance(ev, PlanUpdated):
            click.echo(head + f"plan: {ev.title}\n" + _indent("\n".join(
                f"{n}. [{st.status}] {st.step}" for n, st in enumerate(ev.steps, 1))))
        elif isinstance(ev, TaskStarted):
            click.echo(head + f"task   {ev.call_id} {ev.agent_type} {ev.description!r} -> "
                       f"session {ev.child_session_id}")
        elif isinstance(ev, TaskEnded):
            click.echo(head + f"task   {ev.call_id} ended {ev.status}; files changed: "
                       f"{', '.join(ev.files_changed) or 'none'}")
        elif isinstance(ev, Compacted):
            click.echo(head + f"compacted ({ev.trigger}, {ev.strategy}): {ev.tokens_before} -> "
                       f"{ev.tokens_after} tokens, {len(ev.masked_call_ids)} outputs masked")
        elif isinstance(ev, UndoApplied):
            done = [f.path for f in ev.files if f.action != "refused"]
            refused = [f"{f.path} ({f.reason})" for f in ev.files if f.action == "refused"]
            click.echo(head + f"undo   restored {', '.join(done) or 'nothing'}"
                       + (f"; refused {', '.join(refused)}" if refused else ""))
        elif isinstance(ev, ActionEvent):
            args = json.dumps(ev.args, ensure_ascii=False)
            args = args if len(args) <= 120 else args[:117] + "..."
            click.echo(head + f"call   {ev.call_id} {ev.tool} {args}  [{ev.source}]")
        elif isinstance(ev, ObservationEvent):
            r = ev.result
            status = "ok" if r.ok else f"error {r.error.code if r.error else ''}"
            first = r.content.splitlines()[0] if r.content else ""
            first = first if len(first) <= 100 else first[:97] + "..."
            click.echo(head + f"result {ev.call_id} {ev.tool} {status} ({ev.duration_ms:.1f} ms): {first}")
        elif isinstance(ev, SessionEnded):
            click.echo(head + f"ended: {ev.reason}")


@sessions.command("undo")
@click.argument("session_id")
@click.option("--to-turn", "to_turn", type=int, default=None,
              help="Undo every run after run N (1 = keep the first run's changes; 0 = undo all). "
                   "Default: undo the last run.")
@click.option("--json", "as_json", is_flag=True, help="Print the undo_applied event as JSON.")
def undo_session(session_id: str, to_turn: int | None, as_json: bool) -> None:
    """Put back the files the session's last run (or every run after N) changed.

    Refuses, by name, a file that changed since the session wrote it, and then
    restores nothing.  What bash did is not undone; the output says how many
    bash calls ran.  Exit 1 when something was refused.
    """
    from appliance._session import Session
    from appliance.sessions import UndoError, undo

    store = open_store()
    try:
        session = Session.open(store, session_id)
        event = undo(session, after_turn=to_turn, requested_by="cli")
    except (SessionNotFound, UndoError) as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    if as_json:
        click.echo(event.model_dump_json())
    else:
        for f in event.files:
            click.echo(f"{f.action:<9} {f.path}" + (f": {f.reason}" if f.reason else ""))
        if not event.files:
            click.echo("nothing to undo: those runs changed no file with write or edit")
        if event.bash_calls_not_undone:
            click.echo(f"note: {event.bash_calls_not_undone} bash calls ran in those runs; what "
                       "they did is not undone")
    if any(f.action == "refused" for f in event.files):
        raise SystemExit(1)
