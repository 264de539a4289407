"""``abhed events verify|head|export|repair|rotate|prune|export-requests|join``: the audit
trail's own tools.

``join`` is here, not in the installer, because it is the auditor's check of
event logs against the model service's request record, run on collected
copies off any host: it needs the event log's own verification (this
package, through appliance.events), and the installer may import nothing of the
agent.

verify, repair and export of a file read the log without opening it as a
store, because the store refuses a damaged log and these are what an
operator reaches for when it is damaged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from appliance import AbhedError, events_db_path
from appliance.events.maintenance import (
    EXPORT_FORMATS,
    ExportCheck,
    Problem,
    VerifyReport,
    check_witness,
    collect_heads,
    consistency_problems,
    export_log,
    prune_segments,
    repair_log,
    verify_export,
    verify_log,
)
from appliance.events.requests import JoinReport, collect_agent_logs, export_requests, join_logs
from cli._common import config_option, get_config, open_store
from models import RequestLogError


@click.group()
def events() -> None:
    """Verify, export, rotate, prune and repair the tamper-evident event log."""


def _say_report(report: VerifyReport) -> None:
    segments = len(report.segments)
    if report.ok:
        click.echo(f"ok: {report.events} events in {segments} segment(s), chain intact, files sound "
                   f"(integrity_check, schema, append-only triggers), head {report.head_seq} "
                   f"{report.head_hash}")
    for d in report.deletions:
        click.echo(f"note: segment {d['segment']} (events {d['first_seq']}..{d['last_seq']}) was "
                   f"deleted by {d['deleted_by']} at {d['ts']}, recorded as event "
                   f"{d['recorded_at_seq']}")
    for r in report.repairs:
        click.echo(f"note: repaired at event {r['seq']} ({r['ts']}): kept events up to "
                   f"{r['last_good_seq']}, lost {r['lost_events']}; damaged file kept as "
                   f"{r['damaged_file']} (sha256 {r['damaged_sha256'][:16]}…); damage: {r['damage']}")
    for f in report.forwarding:
        if f["state"] == "interrupted":
            click.echo(f"note: forwarding to {f['destination']} interrupted at event {f['seq']} "
                       f"({f['ts']}): {f['error']}")
        else:
            click.echo(f"note: forwarding to {f['destination']} {f['state']} at event {f['seq']} "
                       f"({f['ts']}): {f['missed']} event(s) missed, {f['replayed']} sent late, "
                       f"{f['lost']} never sent" + (f" (events {f['first_missed_seq']}.."
                                                    f"{f['last_missed_seq']}: export them with "
                                                    "`abhed events export --format ocsf`)"
                                                    if f["lost"] else ""))
    for p in sorted(report.problems, key=lambda p: (p.seq is None, p.seq or 0)):
        where = f"BROKEN at event {p.seq}" if p.seq is not None else "DAMAGED"
        click.echo(f"{where} ({p.file}): {p.what}", err=True)
    if not report.ok:
        click.echo("Nothing was changed. `abhed events repair` salvages every event that still "
                   "verifies into a new segment and keeps the damaged file as evidence.", err=True)


def _say_export(check: ExportCheck) -> None:
    if check.ok:
        m = check.manifest
        click.echo(f"ok: {check.path}: {check.events} events (+{m.get('withheld', 0)} withheld), "
                   f"chain intact from event {m.get('first_seq')} to {m.get('last_seq')}, "
                   f"last hash {m.get('last_hash')}")
    for p in check.problems:
        click.echo(f"BROKEN ({check.path}): {p}", err=True)


@events.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--witness", "witness", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Also check every head the shared host's witness holds for this log "
                   "(default: events.witness_dir from config.json).")
@config_option
@click.option("--file", "files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Verify an export instead of the log; twice or more also checks that the "
                   "exports are consistent (the later extends the earlier).")
def verify(as_json: bool, witness: Path | None, config_path: Path | None,
           files: tuple[Path, ...]) -> None:
    """Check the chain AND the files; exit 0 if all is sound, 1 naming the first bad event."""
    if files:
        checks = [verify_export(f) for f in files]
        ordered = sorted(checks, key=lambda c: max(c.hashes, default=0))
        extra = [p for a, b in zip(ordered, ordered[1:]) for p in consistency_problems(a, b)]
        ok = all(c.ok for c in checks) and not extra
        if as_json:
            click.echo(json.dumps({"ok": ok, "files": [
                {"file": str(c.path), "ok": c.ok, "events": c.events, "manifest": c.manifest,
                 "problems": c.problems} for c in checks], "consistency": extra}, indent=2))
        else:
            for c in checks:
                _say_export(c)
            for p in extra:
                click.echo(f"INCONSISTENT: {p}", err=True)
            if len(checks) > 1 and not extra:
                click.echo("consistent: where the exports overlap they hold the same hashes")
        sys.exit(0 if ok else 1)
    report = verify_log(events_db_path())
    if witness is None:
        configured = get_config(config_path).events.witness_dir
        witness = Path(configured) if configured else None
    checked = 0
    if witness is not None:
        try:
            checked, problems = check_witness(witness, events_db_path())
        except AbhedError as exc:
            raise click.ClickException(str(exc)) from None
        report.problems.extend(Problem(str(witness), None, p) for p in problems)
    if as_json:
        click.echo(json.dumps({**report.as_json(), "witnessed_heads_checked": checked}, indent=2))
    else:
        _say_report(report)
        if witness is not None and report.ok:
            click.echo(f"witness: {checked} head(s) witnessed in {witness} are on the chain")
    sys.exit(0 if report.ok else 1)


@events.command()
def head() -> None:
    """Print the sequence number and head hash; note it down to detect a log cut short later."""
    store = open_store()
    count, digest = store.head()
    click.echo(f"{count} {digest}")


@events.command()
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the JSONL export.")
@click.option("--session", "session", default=None, help="Only this session's events "
              "(the others' hashes stay, so the chain is still checkable).")
@click.option("--since", "since", default=None,
              help="Only events from this UTC time on, ISO 8601 (e.g. 2026-12-01T00:00:00Z).")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="jsonl",
              show_default=True,
              help="jsonl: the stored rows, re-verifiable; ocsf: one OCSF 1.8.0 record per "
                   "event for a SIEM, each naming its seq and hash.")
def export(out: Path, session: str | None, since: str | None, fmt: str) -> None:
    """Write the events as JSON Lines with a manifest an auditor's own script can re-verify."""
    store = open_store()
    try:
        store.verify()
        if session is not None:
            store.session_info(session)
        manifest = export_log(store, out, session=session, since=since, fmt=fmt)
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        store.close()
    left = "left out" if fmt == "ocsf" else "withheld"
    click.echo(f"exported {manifest['events']} events (+{manifest['withheld']} {left}) to {out}"
               f"{' as OCSF 1.8.0 records' if fmt == 'ocsf' else ''}: "
               f"events {manifest['first_seq']}..{manifest['last_seq']}, head "
               f"{manifest['head_seq']} {manifest['head_hash']}")


@events.command()
def repair() -> None:
    """Salvage every event that still verifies into a new segment; keep the damaged file."""
    try:
        result = repair_log(events_db_path())
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"repaired: kept {result.salvaged} events of the damaged segment (up to event "
               f"{result.last_good_seq}, read back by {result.method}), lost {result.lost} that "
               "were readable but no longer chain.")
    click.echo(f"the damaged file is kept untouched as {result.evidence}")
    click.echo(f"events after {result.highest_seen} that only the damaged pages held cannot be "
               "counted: compare with a head you noted (`abhed events head`) to know if any were.")
    click.echo("the repair is recorded as the first event of the new segment; "
               "`abhed events verify` now passes and reports it.")


@events.command()
def rotate() -> None:
    """Seal the active segment now and start a new one (the chain continues)."""
    store = open_store()
    try:
        sealed = store.rotate("operator")
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    click.echo(f"sealed {sealed}; new segment {store.path} continues the chain")


@events.command()
@click.option("--keep", type=click.IntRange(min=0), required=True,
              help="How many of the newest sealed segments to keep.")
@config_option
def prune(keep: int, config_path: Path | None) -> None:
    """Delete old sealed segments; each deletion is recorded in the log first."""
    store = open_store(get_config(config_path))
    try:
        done = prune_segments(store, keep)
    except AbhedError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    for d in done:
        click.echo(f"deleted {d.segment} (events {d.first_seq}..{d.last_seq}, head "
                   f"{d.head_hash[:16]}…); recorded")
    if not done:
        click.echo("nothing to delete")


@events.group()
def witness() -> None:
    """A shared host's head witness (docs/event-log.md, "A shared host")."""


@witness.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
def collect(directory: Path) -> None:
    """Move every head dropped in DIRECTORY/inbox into DIRECTORY/heads (run as the service account)."""
    try:
        taken = collect_heads(directory)
    except OSError as exc:
        raise click.ClickException(f"cannot collect from {directory}: {exc.strerror or exc}") from None
    click.echo(f"collected {taken} head(s) into {directory / 'heads'}")


@events.command("export-requests")
@click.option("--record", "record", required=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The model service's request record (requests.db) or a JSONL export of it.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the export.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "ocsf"]), default="jsonl",
              show_default=True, help="jsonl: the stored rows, re-verifiable; ocsf: one OCSF "
              "1.8.0 API Activity record per request, for a SIEM.")
def export_requests_cmd(record: Path, out: Path, fmt: str) -> None:
    """Verify the model service's request record and write it out (docs/model-service.md)."""
    try:
        count = export_requests(record, out, fmt=fmt)
    except RequestLogError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"exported {count} request record(s) from {record} to {out}"
               + (" as OCSF 1.8.0 records" if fmt == "ocsf" else ""))


@events.command()
@click.option("--requests", "requests", multiple=True, required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="A model host's request record or its JSONL export; repeat for each host.")
@click.option("--agent-logs", "agent_logs", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="A folder of <host>/<engineer>/ each holding that engineer's events.db "
                   "(with segments/) or JSONL export(s).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def join(requests: tuple[Path, ...], agent_logs: Path, as_json: bool) -> None:
    """Join the model side's records to the engineers' sessions (docs/event-log.md).

    Exit 0: every request was in a governed session; 1: requests with no
    governed session were found (listed by engineer and host); 2: could not
    check (a record or log that does not verify, a log from another host).
    """
    try:
        logs = collect_agent_logs(agent_logs)
    except (ValueError, OSError) as exc:
        report = JoinReport(problems=[str(exc)])
    else:
        report = join_logs(list(requests), logs)
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
    else:
        for line in report.lines():
            click.echo(line, err=report.exit_code == 2)
    sys.exit(report.exit_code)
