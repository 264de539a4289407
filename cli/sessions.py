"""``abhed sessions list|show|undo``: ``show`` prints the conversation, not only the calls."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace

import click

from appliance import Session, SessionBusy, SessionNotFound
from appliance.events import (
    ActionEvent,
    ModelTurn,
    ObservationEvent,
    StoredEvent,
    UndoApplied,
    show,
)
from cli._common import open_store

_BODY_CHARS = 2000


@click.group()
def sessions() -> None:
    """List, show (the conversation), undo or redo sessions."""


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
        shown_line = show_line(stored)
        if shown_line is not None:
            click.echo(shown_line)


def show_line(stored: StoredEvent) -> str | None:
    """One event of ``sessions show``: ``#N ts  words``, in :func:`appliance.events.show`'s
    words (the audit records, decisions and the log's own events, are in ``--json``)."""
    ev = stored.event
    if isinstance(ev, ModelTurn) and not ev.text.strip():
        return None  # a turn that only called tools: its calls follow as their own lines
    shown = show(ev)
    if shown.audit:
        return None
    title = shown.title
    if isinstance(ev, (ActionEvent, ObservationEvent)):
        title = f"{'call' if isinstance(ev, ActionEvent) else 'result'} {ev.call_id} {title}"
    elif isinstance(ev, ModelTurn):
        shown = replace(shown, body=ev.text)  # the calls follow as their own lines
    body = shown.body
    if len(body) > _BODY_CHARS:
        body = body[:_BODY_CHARS] + (f"\n[... {len(body) - _BODY_CHARS:,} more characters; "
                                     "--json prints every event whole]")
    shown = replace(shown, body=body)
    return f"#{stored.session_seq:<4} {ev.ts}  " + replace(shown, title=title).text(" " * 9)


_OVERWRITE = click.option(
    "--overwrite", "overwrite", multiple=True, metavar="PATH",
    help="Put this file back even though it changed since (its content now is kept, so it "
         "can be brought back). Repeatable.")
_SKIP = click.option("--skip", "skip", multiple=True, metavar="PATH",
                     help="Leave this file as it is and put back the rest. Repeatable.")


@sessions.command("undo")
@click.argument("session_id")
@click.option("--to-turn", "to_turn", type=int, default=None,
              help="Undo every run after run N that is not undone yet (1 = keep the first run's "
                   "changes; 0 = undo all). Default: the newest run not undone yet that changed "
                   "a file.")
@_OVERWRITE
@_SKIP
@click.option("--json", "as_json", is_flag=True, help="Print the undo_applied event as JSON.")
def undo_session(session_id: str, to_turn: int | None, overwrite: tuple[str, ...],
                 skip: tuple[str, ...], as_json: bool) -> None:
    """Put back the files the session's newest run not undone yet changed (or every run after N).

    Undo again to walk further back; `abhed sessions redo` reverses the last
    undo.  Refuses, by name, a file that changed since the session wrote it
    (and then restores nothing), saying how to overwrite or skip it.  What
    bash did is not undone; the output says how many bash calls ran.  Exit 1
    when something was refused or there is nothing to undo (the runs changed
    no file with write or edit, or are undone already), with or without --to-turn.
    """
    from appliance.sessions import undo

    _undo_door(session_id, as_json, lambda session: undo(
        session, after_turn=to_turn, overwrite=_paths(overwrite), skip=_paths(skip),
        requested_by="cli"))


@sessions.command("redo")
@click.argument("session_id")
@_OVERWRITE
@_SKIP
@click.option("--json", "as_json", is_flag=True, help="Print the undo_applied event as JSON.")
def redo_session(session_id: str, overwrite: tuple[str, ...], skip: tuple[str, ...],
                 as_json: bool) -> None:
    """Reverse the last undo still in effect: its files hold the session's changes again.

    Refuses, by name, a file that changed since the undo (and then restores
    nothing).  Exit 1 when something was refused or no undo is in effect.
    """
    from appliance.sessions import redo

    _undo_door(session_id, as_json, lambda session: redo(
        session, overwrite=_paths(overwrite), skip=_paths(skip), requested_by="cli"))


def _paths(given: tuple[str, ...]) -> list[str]:
    """Paths as the log names them: absolute and resolved (a relative one is from here)."""
    return [os.path.realpath(p) for p in given]


def _undo_door(session_id: str, as_json: bool,
               act: Callable[[Session], UndoApplied]) -> None:
    from appliance.sessions import UndoError

    store = open_store()
    try:
        event = act(Session.open(store, session_id))
    except (SessionNotFound, SessionBusy, UndoError) as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    if as_json:
        click.echo(event.model_dump_json())
    else:
        for f in event.files:
            click.echo(f"{f.action:<9} {f.path}" + (f": {f.reason}" if f.reason else ""))
        if not event.files:
            click.echo(f"nothing to {event.kind}: those runs changed no file with write or edit")
        if event.bash_calls_not_undone:
            click.echo(f"note: {event.bash_calls_not_undone} bash calls ran in those runs; what "
                       "they did is not undone")
    if any(f.action == "refused" for f in event.files):
        raise SystemExit(1)
