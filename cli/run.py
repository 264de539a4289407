"""``abhed run "PROMPT" --workspace DIR``: one headless run of the agent.

Progress goes to stderr for a person; the final answer to stdout.  With
``--json`` every recorded event goes to stdout instead, one JSON object per
line (``{"type": "event", "seq": N, "event": {...}}``), for programs.

The mode is the operator's ``policy.mode`` unless ``--mode`` asks for a
stricter one (or any one, when no ``policy.mode`` is configured); see
docs/policy.md.  What set-up withheld or degraded (an MCP server refused, an
extension dead, the sandbox fallback) is printed as ``warning:`` lines on
stderr and recorded as ``startup_notice`` events.

Exit codes: 0 the model finished; 2 refused before starting (config, a mode
looser than the operator allows, unknown provider or model, undeclared
sampling); 3 a limit ended the run (turns, tokens, deadline, repeated failure,
a full context); 4 the model server failed; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import click

from appliance import AbhedError
from appliance.events import ModelTurn, StoredEvent, show
from appliance.policy import MODES
from cli._common import config_option, get_config, interrupt_from_signal, open_store

EXIT_CODES = {"done": 0, "max_turns": 3, "max_tokens": 3, "deadline": 3, "provider_error": 4,
              "model_stream_lost": 4,
              "interrupted": 130, "repeated_failure": 3, "context_full": 3, "budget": 3}


def event_line(stored: StoredEvent) -> str:
    return json.dumps({"type": "event", "seq": stored.seq,
                       "event": stored.event.model_dump(mode="json")}, ensure_ascii=False)


#: What ``abhed run`` shows a person on stderr, with the symbol in front; the words are
#: :func:`appliance.events.show`'s, as at every door.  The final answer goes to stdout, and
#: set-up notices were printed as ``warning:`` lines before the run.
_PROGRESS: dict[str, str] = {
    "action": "→", "observation": "←", "approval": "?", "policy_rule_added": "+",
    "todo_updated": "", "plan_updated": "", "task_started": "⇢", "task_ended": "⇠",
    "compacted": "≋", "undo_applied": "↶", "extension_died": "!", "run_ended": "■",
}


def progress_line(stored: StoredEvent) -> str | None:
    """The stderr line(s) for one event, or None for what this door does not show."""
    e = stored.event
    if isinstance(e, ModelTurn):
        # A turn that calls tools may say why; the last turn's text is the answer (stdout).
        text = e.text.strip()
        return f"· {text[:500]}" if text and e.tool_calls else None
    symbol = _PROGRESS.get(e.type)
    if symbol is None:
        return None
    shown = show(e)
    return f"{symbol} {shown.text('    ')}" if symbol else shown.text("  ")


def _progress(stored: StoredEvent) -> None:
    line = progress_line(stored)
    if line is not None:
        click.echo(line, err=True)


def _parse_sampling(pairs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--sampling takes NAME=VALUE (JSON value), got {pair!r}")
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            raise click.UsageError(f"--sampling {name}: {raw!r} is not a JSON value") from None
    return out


@click.command()
@click.argument("prompt")
@click.option("--workspace", "-w", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Workspace root the agent works beneath.")
@click.option("--provider", "provider_name", default=None, help="Provider name from custom_providers.")
@click.option("--model", default=None, help="Served model name (default: the provider's).")
@click.option("--json", "as_json", is_flag=True, help="Print every event as a JSON line on stdout.")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="Policy mode (default: policy.mode from config, which is also the ceiling). "
                   "auto: allowed calls run; ask: mutations need approval, which nobody can give "
                   "headless (so: denied); plan: read-only tools only.")
@click.option("--max-turns", type=click.IntRange(1, 10_000), default=None)
@click.option("--deadline-s", type=click.FloatRange(min=0.001), default=None)
@click.option("--sampling", "sampling_pairs", multiple=True, metavar="NAME=VALUE",
              help="A sampling value for this run; must be in the provider's declared list.")
@click.option("--force-tool", default=None,
              help="Make the first model turn call this tool (named tool_choice).")
@click.option("--session", "session_id", default=None, help="Continue this session.")
@config_option
def run(prompt: str, workspace: Path, provider_name: str | None, model: str | None, as_json: bool,
        mode: str | None, max_turns: int | None, deadline_s: float | None, sampling_pairs: tuple[str, ...],
        force_tool: str | None, session_id: str | None, config_path: Path | None) -> None:
    """Work on PROMPT in a workspace until the model answers or a limit stops it."""
    from appliance.compose import start_agent, to_say
    from appliance.policy import HeadlessApprover
    from models import ModelNotFound, ModelsError, ProviderConfigError

    config = get_config(config_path, {f"loop.{k}": (v, f"abhed run --{k.replace('_', '-')}")
                                      for k, v in (("max_turns", max_turns), ("deadline_s", deadline_s))
                                      if v is not None})
    if len(prompt) > 1_000_000:
        raise click.UsageError("PROMPT is longer than 1,000,000 characters; put it in a file the agent can read")
    if force_tool is not None:
        from tools import native_tools

        if force_tool not in native_tools():
            raise click.UsageError(f"--force-tool {force_tool!r} is not a tool; tools: "
                                   f"{', '.join(sorted(native_tools()))}")
    store = open_store(config, for_work=True)
    head_before = store.head()[0]
    try:
        started = start_agent(
            config, store, workspace, door="abhed run --mode", provider_name=provider_name,
            model=model, mode=mode,
            approver=HeadlessApprover(), sampling=_parse_sampling(sampling_pairs),
            session_id=session_id, say=lambda line: click.echo(line, err=True),
            first_tool_choice={"type": "function", "function": {"name": force_tool}} if force_tool else None)
    except (AbhedError, ProviderConfigError, ModelNotFound) as exc:
        store.close()
        raise click.UsageError(str(exc)) from None
    except ModelsError as exc:
        store.close()
        click.echo(f"error: {exc}", err=True)
        sys.exit(4)
    agent, provider = started.agent, started.provider
    for notice in to_say(started.notices):  # a note about the installation: once per terminal
        click.echo(notice.line(), err=True)

    def print_event(stored: StoredEvent) -> None:
        sys.stdout.write(event_line(stored) + "\n")
        sys.stdout.flush()

    if as_json:
        # start_agent recorded this session's start (and any start-up notices) before a
        # listener could be attached: print those first, so --json is every event it made.
        for stored in store.events(agent.session.id):
            if stored.seq > head_before:
                print_event(stored)
        agent.session.listen(print_event, children=True)
    else:
        agent.session.listen(_progress)
    click.echo(f"session: {agent.session.id} model: {provider.model} mode: {started.mode.mode} "
               f"({started.mode.chosen_by})", err=True)

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        interrupt_from_signal(agent.interrupt, "Ctrl-C")

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        outcome = agent.run(prompt)
    finally:
        signal.signal(signal.SIGINT, previous)
        agent.close()
        store.close()
    if not as_json and outcome.answer is not None:
        sys.stdout.write(outcome.answer + ("" if outcome.answer.endswith("\n") else "\n"))
    if outcome.reason != "done":
        click.echo(f"abhed run: {outcome.reason}: {outcome.message}", err=True)
    sys.exit(EXIT_CODES[outcome.reason])
