"""``abhed probe``: check that a model can drive Abhed before it serves the site.

Prints a table (or ``--json``, the whole report), writes the report with
``--out``, records every request, reply and call as one session in the event
log.  See docs/probe.md.

Exit codes: 0 the model passed; 1 it failed a gate (the report says which and
why); 2 usage or configuration refused; 4 the model server could not be reached;
130 interrupted (Ctrl-C or SIGTERM: the requests in flight are closed, the
scratch folder removed, the session ended; no report).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType

import click

from appliance import AbhedError
from cli._common import config_option, get_config, open_store


@click.command()
@click.option("--provider", "provider_name", default=None, help="Provider from custom_providers (default: the default one).")
@click.option("--model", default=None, help="Served model name (default: the provider's).")
@click.option("--quick", is_flag=True, help="Only the bar's quick families (default: wire and recovery).")
@click.option("--family", "families", multiple=True, metavar="F",
              type=click.Choice(["wire", "decide", "steps", "recovery", "tasks"]),
              help="Run only this family (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of the table.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the JSON report to this file.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The current model's report: families may not fall below it (the soft gate).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=16, show_default=True,
              help="Case runs in flight at once (vLLM batches them).")
@config_option
def probe(provider_name: str | None, model: str | None, quick: bool, families: tuple[str, ...],
          as_json: bool, out_path: Path | None, baseline: Path | None, concurrency: int,
          config_path: Path | None) -> None:
    """Run the capability probe against a provider's model and say whether it may serve."""
    from appliance.probe import (
        ProbeInterrupted,
        ProbeOptions,
        load_report,
        render_table,
        report_json,
        run_probe,
    )
    from models import CancelToken, ModelsError, ProviderConfigError, ProviderError, ServeError

    config = get_config(config_path)
    try:
        base = load_report(baseline) if baseline is not None else None
    except AbhedError as exc:
        raise click.UsageError(str(exc)) from None
    store = open_store()
    cancel = CancelToken()

    def stop(signum: int, frame: FrameType | None) -> None:
        # No KeyboardInterrupt: it would leave the workers running (and writing into the
        # scratch folder) while the pool waits for them. The cancel closes their requests.
        if not cancel.cancelled:
            click.echo("abhed probe: stopping: closing the requests in flight", err=True)
        cancel.cancel("Ctrl-C" if signum == signal.SIGINT else "SIGTERM")

    old_int = signal.signal(signal.SIGINT, stop)
    old_term = signal.signal(signal.SIGTERM, stop)
    try:
        report = run_probe(config, store, provider_name=provider_name, model=model,
                           options=ProbeOptions(quick=quick, families=tuple(dict.fromkeys(families)),
                                                concurrency=concurrency, baseline=base),
                           say=lambda line: click.echo(line, err=True), cancel=cancel)
    except ProbeInterrupted as exc:
        click.echo(f"abhed probe: {exc}", err=True)
        sys.exit(130)
    except (AbhedError, ProviderConfigError) as exc:
        raise click.UsageError(str(exc)) from None
    except (ProviderError, ServeError) as exc:  # a local service started on demand that failed too
        click.echo(f"abhed probe: the model server cannot be reached: {exc}", err=True)
        sys.exit(4)
    except ModelsError as exc:
        raise click.UsageError(str(exc)) from None
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        store.close()
    text = report_json(report)
    if out_path is not None:
        try:
            out_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = out_path.with_name(out_path.name + ".partial")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(out_path)
        except OSError as exc:
            raise click.ClickException(f"cannot write the report to {out_path}: {exc.strerror}") from None
    sys.stdout.write(text if as_json else render_table(report))
    sys.exit(0 if report.passed else 1)
