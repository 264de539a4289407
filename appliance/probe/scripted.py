"""Scripted models for the probe: the reference (good) model and the bad ones the probe must catch.

Shipped in the package, like ``models.scripted.ScriptedServer`` it builds on, so the
probe, the CLI and the installer's health gate can be tested without a GPU.
:class:`ReferenceModel` is a responder for :class:`models.scripted.ScriptedServer`: it
recognises a probe case by its prompt (the workspace is read from the system
prompt, as a model would), and replies with the case's reference turns.  A
behaviour turns it into a bad model:

==================  ====================================================
``good``            the reference turns: passes every family
``text_calls``      calls written as qwen3-coder XML in ``content``
``broken_stream``   streamed calls lose their arguments (non-streamed fine)
``loops``           repeats the injected failing call, whatever it is told
``ignores_denial``  after a policy denial, tries variants of the call
``no_tools``        answers in prose instead of calling any tool
==================  ====================================================

Anything that is not a probe case is answered from ``fallback`` steps in
order (the installer gate's known-answer prompt and agent probe).

Run standalone, as the test bundles' model server does::

    python -m appliance.probe.scripted --behaviour good --script STEPS.json --port 0 --model tiny
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from appliance.probe._cases import Case, RefCall, RefTurn, load_cases
from appliance.probe._fixture import render
from foundation import FoundationError
from models.scripted import (
    ScriptedCall,
    ScriptedServer,
    ScriptStep,
    read_script,
    serve_until_interrupted,
)

__all__ = ["BEHAVIOURS", "ReferenceModel", "serve"]

BEHAVIOURS: tuple[str, ...] = ("good", "text_calls", "broken_stream", "loops", "ignores_denial",
                               "no_tools")

_WORKSPACE = re.compile(r"The workspace root is (/.*?)\.\n")
_RE = re.compile(r"\{re:(.+?)\}(?!\})")


def _content(msg: dict[str, Any]) -> str:
    c = msg.get("content")
    return c if isinstance(c, str) else ""


class ReferenceModel:
    """A responder for :class:`models.scripted.ScriptedServer` (``responder=ReferenceModel(...)``)."""

    def __init__(self, behaviour: str = "good", *, cases: Sequence[Case] | None = None,
                 fallback: Sequence[ScriptStep | dict[str, Any]] = ()) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour {behaviour!r} is not one of {', '.join(BEHAVIOURS)}")
        self.behaviour = behaviour
        self.cases = tuple(cases if cases is not None else load_cases())
        self.fallback = [s if isinstance(s, ScriptStep) else ScriptStep.model_validate(s) for s in fallback]
        self._lock = threading.Lock()

    def _case(self, system: str, user: str) -> tuple[Case, str] | None:
        m = _WORKSPACE.search(system)
        ws = m.group(1) if m else ""
        for case in self.cases:
            rendered = case.prompt.replace("{workspace}", ws)
            if user == rendered or (case.near_context and user.endswith(rendered)):
                return case, ws
        return None

    def __call__(self, body: dict[str, Any]) -> ScriptStep:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        system = next((_content(m) for m in messages if m.get("role") == "system"), "")
        user = next((_content(m) for m in messages if m.get("role") == "user"), "")
        found = self._case(system, user) if system else None
        if found is None:
            with self._lock:
                if self.fallback:
                    return self.fallback.pop(0)
            return ScriptStep(text="This scripted model only knows the probe's cases.")
        case, ws = found
        assistants = sum(1 for m in messages if m.get("role") == "assistant")
        k = assistants - len(case.inject)
        turn = case.reference[k] if k < len(case.reference) else RefTurn(text="Done.")
        results = "\n".join(_content(m) for m in messages if m.get("role") == "tool")
        return self._behave(case, turn, ws, results, stream=bool(body.get("stream")), k=k)

    def _behave(self, case: Case, turn: RefTurn, ws: str, results: str, *, stream: bool,
                k: int) -> ScriptStep:
        calls = list(turn.calls)
        b = self.behaviour
        if b == "loops" and case.inject:
            calls = [case.inject[-1]]
        if b == "ignores_denial" and case.stop:
            variants = ["git push --force origin main", "git push origin HEAD", "git push -u origin main"]
            calls = [RefCall(name="bash", arguments={"command": variants[min(k, 2)],
                                                     "description": "Push again"})]
        text = _answer(turn.text, results) if not calls else ""
        if b == "no_tools" and calls:
            return ScriptStep(text="I would look at the files and then make the change.")
        rendered = [ScriptedCall(name=c.name, arguments=_render(c.arguments, ws)) for c in calls]
        if b == "text_calls" and rendered:
            return ScriptStep(text="\n".join(_as_xml(c) for c in rendered))
        if b == "broken_stream" and stream and rendered:
            rendered = [ScriptedCall(name=c.name, arguments="") for c in rendered]
        return ScriptStep(text=text, tool_calls=rendered)


def _render(value: Any, ws: str) -> Any:
    if isinstance(value, str):
        return render(value, ws, "")
    if isinstance(value, list):
        return [_render(v, ws) for v in value]
    if isinstance(value, dict):
        return {k: _render(v, ws) for k, v in value.items()}
    return value


def _answer(text: str, results: str) -> str:
    """``{re:PATTERN}``: the first group of PATTERN in the tool results seen so far."""
    def sub(m: re.Match[str]) -> str:
        found = re.search(m.group(1), results)
        return found.group(1) if found else "(not found)"
    return _RE.sub(sub, text)


def _as_xml(call: ScriptedCall) -> str:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
                     for k, v in args.items())
    return f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>"


def serve(behaviour: str, *, script: Path | None = None, port: int = 0,
          model: str = "scripted") -> ScriptedServer:
    """Start a scripted server answering as ``behaviour`` (steps from ``script`` for anything else)."""
    steps = read_script(script) if script is not None else []
    return ScriptedServer(responder=ReferenceModel(behaviour, fallback=steps), model=model,
                          port=port).start()


def _main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m appliance.probe.scripted",
                                 description="A scripted model server for the capability probe.")
    ap.add_argument("--behaviour", choices=BEHAVIOURS, default="good")
    ap.add_argument("--script", type=Path, default=None,
                    help="JSON list of steps for requests that are not probe cases.")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", default="scripted")
    ns = ap.parse_args(argv)
    try:
        server = serve(ns.behaviour, script=ns.script, port=ns.port, model=ns.model)
    except FoundationError as exc:
        ap.error(str(exc))
    serve_until_interrupted(server)


if __name__ == "__main__":
    _main()
