"""``abhed policy explain``: the decision a call would get, and what made it, for one call or a file.

Nothing is run: arguments are validated and normalized exactly as dispatch
would, configured extensions are asked for their ``tool_call`` verdict, and the
engine decides.  One call prints a sentence, then the decision as JSON on the
last line.  ``--batch FILE`` reads JSON lines (one call each) and writes one
JSON line per input line, in order: a start-up is paid once, not per command,
which is what an operator checking a rule set against hundreds of commands
needs (benchmarks/policy measures it).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click

from appliance import AbhedError
from appliance.compose import Config
from appliance.extensions import ExtensionHost
from appliance.policy import (
    MODES,
    Decision,
    Gate,
    HookVerdict,
    PolicyEngine,
    Rule,
    normalize_args,
)
from cli._common import config_option, get_config
from tools import Tool, ToolContext, ToolFailure, Workspace, native_tools

MAX_LINE_BYTES = 1 << 20  # one call per line; a longer line is answered with an error


@click.group()
def policy() -> None:
    """Inspect the operator policy."""


class _Explainer:
    """The tools, engines and extensions of one ``explain`` run, set up once."""

    def __init__(self, config: Config, workspace: Path, mode: str | None, no_extensions: bool) -> None:
        self.config = config
        self.mode = mode
        self.engines: dict[str | None, PolicyEngine] = {}
        self.tools: dict[str, Tool] = dict(native_tools())
        self.ctx = ToolContext(workspace=Workspace(str(workspace), config.tools.secret_paths))
        self.host = None if no_extensions or not config.extensions else ExtensionHost(config.extensions)
        if self.host is not None:
            try:
                self.tools.update(self.host.list_tools(self.tools))
            except AbhedError as exc:
                self.close()
                raise click.ClickException(str(exc)) from None

    def close(self) -> None:
        if self.host is not None:
            self.host.close("explain")
            self.host = None

    def engine(self, mode: str | None) -> PolicyEngine:
        mode = mode or self.mode
        if mode not in self.engines:
            settings = self.config.policy if mode is None else \
                self.config.policy.model_copy(update={"mode": mode})
            self.engines[mode] = PolicyEngine(settings)
        return self.engines[mode]

    def tool(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def explain(self, tool: Tool, args: Any, mode: str | None = None) -> dict[str, Any]:
        """The decision for one call, as the JSON object both forms print."""
        try:
            norm = normalize_args(tool, args, self.ctx).model_dump()
        except ToolFailure as exc:
            return {"verdict": "invalid", "decided_by": exc.code, "reason": exc.message}
        verdict = HookVerdict()
        if self.host is not None:
            verdict = self.host.tool_call("explain", tool.name, norm)
            if verdict.args is not None:
                norm = normalize_args(tool, verdict.args, self.ctx).model_dump()
        decision: Decision = Gate._with_hook(self.engine(mode).decide(tool, norm, self.ctx.workspace.root),
                                             verdict)
        return {"verdict": decision.verdict, "decided_by": decision.decided_by,
                "reason": decision.reason, "commands": list(decision.commands), "args": norm,
                "always": [r.model_dump(exclude_defaults=True) for r in decision.always]}


@policy.command()
@click.argument("tool_name", metavar="TOOL", required=False)
@click.argument("args_json", required=False)
@click.option("--batch", "batch", type=click.File("rb"), default=None, metavar="FILE",
              help="Explain every call in FILE (JSON lines, '-' for stdin); one JSON line out per "
                   "line in, in order.")
@click.option("--workspace", "-w", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path.cwd, show_default="current directory",
              help="Workspace the paths resolve beneath.")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="Explain under this mode instead of the configured one.")
@click.option("--no-extensions", is_flag=True, help="Leave configured extensions out.")
@config_option
def explain(tool_name: str | None, args_json: str | None, batch: IO[bytes] | None, workspace: Path,
            mode: str | None, no_extensions: bool, config_path: Path | None) -> None:
    """Print the decision for TOOL called with ARGS_JSON (or for each call in --batch FILE),
    and the rule or extension that made it.

    A --batch line is {"tool": "bash", "args": {...}}, or {"command": "..."} for bash; it may
    carry an "id" (echoed back) and a "mode" (plan, ask or auto). Each output line has "line"
    (1-based), the id, and either the decision or an "error" saying what was wrong with that
    line; the exit status is 1 when any line had one.
    """
    if batch is not None and (tool_name is not None or args_json is not None):
        raise click.UsageError("give either TOOL ARGS_JSON or --batch FILE, not both")
    if batch is None and (tool_name is None or args_json is None):
        raise click.UsageError("give TOOL and ARGS_JSON (e.g. bash '{\"command\": \"git status\"}'), "
                               "or --batch FILE with one call per line")
    config = get_config(config_path)
    if batch is None:
        assert tool_name is not None and args_json is not None
        _explain_one(config, tool_name, args_json, workspace, mode, no_extensions)
        return
    explainer = _Explainer(config, workspace, mode, no_extensions)
    try:
        counts = _explain_batch(explainer, batch, sys.stdout)
    finally:
        explainer.close()
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    click.echo(f"explained {sum(counts.values())} lines: {summary or 'none'}", err=True)
    if counts.get("error"):
        sys.exit(1)


def _explain_one(config: Config, tool_name: str, args_json: str, workspace: Path, mode: str | None,
                 no_extensions: bool) -> None:
    try:
        args = json.loads(args_json)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"ARGS_JSON is not valid JSON ({exc.msg} at column {exc.colno}); "
                               "quote it, e.g. '{\"command\": \"git status\"}'") from None
    explainer = _Explainer(config, workspace, mode, no_extensions)
    try:
        tool = explainer.tool(tool_name)
        if tool is None:
            raise click.UsageError(f"unknown tool {tool_name!r}; tools: {', '.join(sorted(explainer.tools))}")
        out = explainer.explain(tool, args)
    finally:
        explainer.close()
    if out["verdict"] == "invalid":
        click.echo(f"refused before policy: {out['reason']}")
    else:
        click.echo(f"{out['verdict']} (by {out['decided_by']}): {out['reason']}")
        for rule in out["always"]:
            click.echo(f"  'always allow' would store: {Rule.model_validate(rule).describe()}")
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(number, line) for every line; ``None`` for one longer than :data:`MAX_LINE_BYTES`."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:  # skip the rest of the long line, keep counting from the next
                rest = stream.readline(MAX_LINE_BYTES)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, None
            continue
        yield number, line.rstrip(b"\r\n")


def _explain_batch(explainer: _Explainer, stream: IO[bytes], out: IO[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for number, raw in _lines(stream):
        answer = _answer(explainer, number, raw)
        counts["error" if "error" in answer else answer["verdict"]] += 1
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        out.flush()
    return counts


def _answer(explainer: _Explainer, number: int, raw: bytes | None) -> dict[str, Any]:
    head: dict[str, Any] = {"line": number}

    def error(code: str, message: str) -> dict[str, Any]:
        return {**head, "error": {"code": code, "message": f"line {number}: {message}"}}

    if raw is None:
        return error("too_long", f"longer than {MAX_LINE_BYTES} bytes; put one call per line "
                                 "and keep each under 1 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return error("not_utf8", f"byte {exc.start + 1} is not UTF-8; save the file as UTF-8")
    if not text.strip():
        return error("empty", 'empty line; each line must be one call, e.g. {"command": "git status"}')
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        return error("not_json", f"not JSON ({exc.msg} at column {exc.colno}); each line must be "
                                 'one JSON object, e.g. {"command": "git status"}')
    except RecursionError:  # [[[[... past Python's recursion limit: this line only, not the run
        return error("not_json", "nests too deeply to read (thousands of [ or {); each line must "
                                 'be one flat JSON object, e.g. {"command": "git status"}')
    if not isinstance(item, dict):
        return error("not_object", f"a JSON {type(item).__name__}, not an object; write "
                                   '{"tool": "bash", "args": {...}} or {"command": "..."}')
    if "id" in item:
        head["id"] = item["id"]
    mode = item.get("mode")
    if mode is not None and mode not in MODES:
        return error("bad_mode", f"mode {mode!r} is not one of {', '.join(MODES)}")
    tool_name = item.get("tool", "bash" if "command" in item else None)
    if not isinstance(tool_name, str):
        return error("no_tool", 'no "tool" (a string) and no "command"; write '
                                '{"tool": "bash", "args": {...}} or {"command": "..."}')
    args = item.get("args", {})
    if "command" in item:
        if tool_name != "bash" or not isinstance(item["command"], str) or not isinstance(args, dict):
            return error("bad_command", '"command" is a string, for bash, beside an optional '
                                        '"args" object: {"command": "git status"}')
        # the shorthand: a description is required by the tool, not by the question
        args = {"description": "policy explain --batch", **args, "command": item["command"]}
    tool = explainer.tool(tool_name)
    if tool is None:
        return error("unknown_tool", f"unknown tool {tool_name!r}; tools: "
                                     f"{', '.join(sorted(explainer.tools))}")
    head["tool"] = tool.name
    return {**head, **explainer.explain(tool, args, mode)}
