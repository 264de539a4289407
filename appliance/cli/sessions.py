"""``abhed sessions list|show``."""

from __future__ import annotations

import json

import click

from appliance._errors import SessionNotFound
from appliance.cli._common import open_store
from appliance.events import ActionEvent, ObservationEvent, SessionEnded, SessionStarted


@click.group()
def sessions() -> None:
    """List recorded sessions or show one."""


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
    """The events of one session, in order."""
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
            click.echo(head + f"started (abhed {ev.abhed_version})")
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
