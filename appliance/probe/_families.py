"""Run one case of each family and score it by its rule (shape, decision, end state).

Each function gets a ready :class:`CaseRun` (workspace materialised, a
conversation started, a dispatcher where calls must run) and fills in a
:class:`RunResult`.  Nothing here judges text beyond a case's own regex.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from appliance.probe._cases import CallMatch, Case
from appliance.probe._conversation import CallRecord, Conversation, failed_code
from appliance.probe._fixture import render
from appliance.probe._markup import detect_markup
from appliance.probe._result import CallInfo, RunResult, clip
from models import ModelReply
from tools import Tool

__all__ = ["CaseRun", "run_decide", "run_multistep", "run_recovery", "run_wire"]

# One constant line (no counter: digits tokenize unevenly), so a sample measures the whole.
_FILLER = ("Note: the build server keeps its logs for thirty days, and the nightly job "
           "archives them to the backup volume before the weekly report is written.\n")


@dataclass
class CaseRun:
    """Everything one run of one case needs."""

    case: Case
    conv: Conversation
    workspace: Path
    nonce: str
    tools: dict[str, Tool]
    result: RunResult
    named: bool = False
    max_model_len: int | None = None
    exact_compare: bool = True
    originals: dict[str, str] = field(default_factory=dict)

    def hide(self, text: str | None) -> str | None:
        """Text for evidence: the scratch path as {workspace}, so it reads the same everywhere."""
        return None if text is None else text.replace(str(self.workspace), "{workspace}")

    def r(self, value: Any) -> Any:
        """Render placeholders in a case value (strings, lists, dicts)."""
        if isinstance(value, str):
            return render(value, str(self.workspace), self.nonce)
        if isinstance(value, list | tuple):
            return [self.r(v) for v in value]
        if isinstance(value, dict):
            return {k: self.r(v) for k, v in value.items()}
        return value


# -- shared checks -----------------------------------------------------------

def _args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None


def schema_ok(run: CaseRun, name: str, raw: str) -> bool:
    """The call names an offered tool and its arguments validate against that tool's schema."""
    args = _args(raw)
    if not isinstance(args, dict):
        return False
    tool = run.tools.get(name)
    if tool is not None:
        try:
            tool.args_model.model_validate(args)
        except ValidationError:
            return False
        return True
    for spec in run.case.extra_tools:
        fn = spec.get("function", {})
        if fn.get("name") == name:
            params = fn.get("parameters") or {}
            props = params.get("properties") or {}
            required = params.get("required") or []
            return set(args) <= set(props) and all(r in args for r in required)
    return False


def note_reply(run: CaseRun, reply: ModelReply, *, stream: bool) -> None:
    """Markup in content and schema validity, counted for every reply of every family."""
    res = run.result
    found = detect_markup(reply.text)
    if found is not None:
        res.text_calls.append(f"{found[0]} ({found[1]})")
    for c in reply.tool_calls:
        res.schema_total += 1
        if schema_ok(run, c.name, c.arguments):
            res.schema_valid += 1
        res.calls.append(CallInfo(source="model", name=c.name, arguments=clip(c.arguments) or "",
                                  stream=stream))


def _matches(run: CaseRun, m: CallMatch, rec: CallRecord) -> bool:
    if rec.name != m.tool or (m.ok and rec.code not in ("", "truncated")):
        return False
    args = rec.args if isinstance(rec.args, dict) else {}
    for key, want in m.args_contain.items():
        if run.r(want) not in str(args.get(key, "")):
            return False
    if m.min_offset is not None:
        offset = args.get("offset")
        if not isinstance(offset, int) or offset < m.min_offset:
            return False
    return True


def _end_state(run: CaseRun, answer: str | None) -> None:
    """Score the case's check; each part becomes a named check with evidence."""
    chk, res = run.case.check, run.result
    if chk.answer_matches is not None:
        pattern = run.r(chk.answer_matches)
        ok = answer is not None and re.search(pattern, answer) is not None
        res.checks["answer"] = ok
        if not ok:
            res.evidence.append(f"the answer {clip(run.hide(answer), 200)!r} does not match {pattern!r}")
    for rel, pattern in chk.files_match.items():
        try:
            text = (run.workspace / rel).read_text("utf-8")
        except OSError as exc:
            text, why = "", f"{rel} cannot be read ({exc.strerror})"
        else:
            why = f"{rel} does not match {pattern!r}; it holds {clip(text, 300)!r}"
        ok = re.search(run.r(pattern), text) is not None
        res.checks[f"file:{rel}"] = ok
        if not ok:
            res.evidence.append(why)
    for rel in chk.files_unchanged:
        try:
            now = (run.workspace / rel).read_text("utf-8")
        except OSError:
            now = None
        ok = now == run.originals.get(rel)
        res.checks[f"unchanged:{rel}"] = ok
        if not ok:
            res.evidence.append(f"{rel} was changed, and the task said not to")
    for m in chk.called:
        ok = any(_matches(run, m, rec) for rec in run.conv.calls if rec.source == "model")
        res.checks[f"called:{m.tool}"] = ok
        if not ok:
            res.evidence.append(f"no successful {m.tool} call {m.args_contain or ''} was made")
    if chk.command is not None:
        for rel, content in chk.hidden_files.items():
            path = run.workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        assert run.conv.dispatcher is not None
        result = run.conv.dispatcher.call("bash", {"command": chk.command,
                                                   "description": "probe: check the end state"},
                                          source="probe")
        ok = failed_code(result) == ""
        res.checks["command"] = ok
        if not ok:
            res.evidence.append(f"`{chk.command}` failed: {clip(result.content, 600)}")


def _record_calls(run: CaseRun) -> None:
    res = run.result
    by_args = {(c.name, c.arguments): c for c in res.calls if c.source == "model"}
    for rec in run.conv.calls:
        info = by_args.get((rec.name, clip(rec.arguments) or ""))
        if rec.source == "probe":
            res.calls.append(CallInfo(source="probe", name=rec.name, arguments=clip(rec.arguments) or "",
                                      code=rec.code))
        elif info is not None:
            info.code = rec.code
    # the longest run of the same failed call, injected ones included
    longest = current = 0
    last = ""
    for rec in run.conv.calls:
        if rec.code and rec.code != "truncated":
            current = current + 1 if rec.key == last else 1
            last = rec.key
        else:
            current, last = 0, ""
        longest = max(longest, current)
    res.longest_failed_repeat = longest
    denied = False
    for rec in run.conv.calls:
        if rec.source == "model" and rec.code == "policy_denied":
            denied = True
    res.denied_retry = denied and any(r.source == "probe" and r.code == "policy_denied"
                                      for r in run.conv.calls)


def _loop(run: CaseRun, max_turns: int) -> str | None:
    """Ask, run the calls, repeat; the final text answer, or None if the turns ran out."""
    for _ in range(max_turns):
        reply = run.conv.ask(stream=True, max_tokens=run.case.max_tokens)
        note_reply(run, reply, stream=True)
        if not reply.tool_calls:
            return reply.text
        for call in reply.tool_calls:
            run.conv.dispatch(call)
    return None


# -- the families --------------------------------------------------------------

def _pad(run: CaseRun, prompt: str, choice: Any) -> str:
    """The prompt behind enough notes to fill ~90% of the context, measured on the server.

    Two one-token requests (system prompt and tools with a one-word message,
    then with a sample of the notes) give the fixed part and tokens per
    character, whatever the tokenizer.
    """
    assert run.max_model_len is not None
    sample = _FILLER * 8  # small: the fixed part alone may be most of a small context
    conv = run.conv
    used: list[int] = []
    for text in ("ok", sample):
        conv.messages = [{"role": "system", "content": conv.system}, {"role": "user", "content": text}]
        reply = conv.ask(stream=False, tool_choice=choice, max_tokens=1, keep=False)
        used.append(reply.usage.prompt_tokens if reply.usage else 0)
    run.result.metrics["calibration_prompt_tokens"] = used
    if used[1] > used[0] > 0:
        base, per_char = used[0], (used[1] - used[0]) / len(sample)
    else:
        base, per_char = 4000, 1 / 3
    target = int(run.max_model_len * 0.9)
    budget = target - run.case.max_tokens - base - len(prompt)
    lines = max(0, int(budget / max(per_char, 1e-3)) // len(_FILLER))
    run.result.metrics["padding_chars"] = lines * len(_FILLER)
    run.result.metrics["context_target_tokens"] = target
    return _FILLER * lines + "\n" + prompt


def run_wire(run: CaseRun) -> None:
    case, res = run.case, run.result
    prompt = run.r(case.prompt)
    choice: Any = None
    expect_calls = case.expect_calls
    expect_args = [run.r(a) for a in case.expect_args]
    if run.named:
        choice = {"type": "function", "function": {"name": case.reference[0].calls[0].name}}
        expect_calls, expect_args = 1, expect_args[:1]
    if case.near_context:
        if run.max_model_len is None:
            res.skipped = "no catalog entry gives this provider's context length"
            return
        prompt = _pad(run, prompt, choice)
    run.conv.start(prompt, title=case.title)
    got: dict[bool, list[tuple[str, Any]]] = {}
    for stream in (False, True):
        reply = run.conv.ask(stream=stream, tool_choice=choice, max_tokens=case.max_tokens, keep=False)
        note_reply(run, reply, stream=stream)
        mode = "streamed" if stream else "not streamed"
        calls = [(c.name, _args(c.arguments)) for c in reply.tool_calls]
        got[stream] = calls
        structured = len(calls) >= expect_calls and detect_markup(reply.text) is None
        res.checks[f"structured:{mode}"] = structured
        if not structured:
            if detect_markup(reply.text) is not None:
                res.evidence.append(f"{mode}: the call came back as text in content: {clip(run.hide(reply.text), 300)!r}")
            else:
                res.evidence.append(f"{mode}: {len(calls)} tool call(s), {expect_calls} asked for; "
                                    f"text: {clip(run.hide(reply.text), 200)!r} (finish_reason {reply.finish_reason})")
        valid = all(schema_ok(run, c.name, c.arguments) for c in reply.tool_calls)
        res.checks[f"schema:{mode}"] = valid
        if not valid:
            res.evidence.append(f"{mode}: arguments not valid for the tool: "
                                + "; ".join(f"{c.name} {clip(run.hide(c.arguments), 200)}" for c in reply.tool_calls))
        match = len(calls) >= len(expect_args) and all(
            isinstance(calls[i][1], dict) and all(calls[i][1].get(k) == v for k, v in want.items())
            for i, want in enumerate(expect_args))
        res.checks[f"arguments:{mode}"] = match
        if not match and structured:
            res.evidence.append(f"{mode}: arguments differ from the ones asked for: got "
                                f"{clip(json.dumps([c[1] for c in calls], ensure_ascii=False), 300)}, "
                                f"asked {clip(json.dumps(expect_args, ensure_ascii=False), 300)}")
    if run.exact_compare:
        equal = got[True] == got[False]
    else:  # no fixed seed: compare the shape only
        def shape(cs: list[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
            return [(n, sorted(a) if isinstance(a, dict) else []) for n, a in cs]
        equal = shape(got[True]) == shape(got[False])
    res.stream_equal = equal
    res.checks["stream_equals_non_stream"] = equal
    if not equal:
        res.evidence.append(f"streamed calls {clip(json.dumps(got[True], ensure_ascii=False), 300)} differ "
                            f"from non-streamed {clip(json.dumps(got[False], ensure_ascii=False), 300)}")
    res.passed = all(res.checks.values())
    run.conv.end(None, "probe: wire case scored")


def classify(reply: ModelReply) -> str:
    if reply.tool_calls:
        return "call"
    if detect_markup(reply.text) is not None:
        return "call"  # meant as a call, though it will never run (counted as a text call too)
    return "ask" if "?" in reply.text else "answer"


def run_decide(run: CaseRun) -> None:
    case, res = run.case, run.result
    run.conv.start(run.r(case.prompt), title=case.title)
    reply = run.conv.ask(stream=True, max_tokens=case.max_tokens)
    note_reply(run, reply, stream=True)
    res.expected, res.decision = case.expect, classify(reply)
    res.answer = clip(reply.text)
    res.passed = res.decision == res.expected
    res.checks["decision"] = res.passed
    if not res.passed:
        res.evidence.append(f"expected {case.expect}, the model did {res.decision}: "
                            + (", ".join(c.name for c in reply.tool_calls) or repr(clip(run.hide(reply.text), 200))))
    run.conv.end(reply.text, "probe: decide case scored")


def run_multistep(run: CaseRun) -> None:
    """steps and tasks: work the prompt to an answer, then score the end state."""
    case, res = run.case, run.result
    run.conv.start(run.r(case.prompt), title=case.title)
    answer = _loop(run, case.max_turns)
    res.answer = clip(answer)
    res.checks["finished"] = answer is not None
    if answer is None:
        res.evidence.append(f"no answer within {case.max_turns} turns")
    _end_state(run, answer)
    _record_calls(run)
    res.passed = all(res.checks.values())
    run.conv.end(answer, "probe: case scored")


def run_recovery(run: CaseRun, variant: str) -> None:
    case, res = run.case, run.result
    run.conv.start(run.r(case.prompt), title=case.title)
    failing: CallRecord | None = None
    for i, call in enumerate(case.inject):
        if i == len(case.inject) - 1:
            for rel, content in case.modify_before_last.items():
                (run.workspace / rel).write_text(run.r(content), encoding="utf-8")
        failing = run.conv.inject(call.name, run.r(call.arguments), i)
    if failing is not None:
        if failing.code != case.inject_code:
            res.skipped = (f"broken case: the injected {failing.name} call got "
                           f"{failing.code or 'success'}, not {case.inject_code}")
            run.conv.end(None, "probe: broken case")
            return
        if variant == "terse":
            assert failing.result is not None
            if failing.code == "truncated":
                kept = "\n".join(ln for ln in failing.result.content.splitlines()
                                 if not ln.startswith("[truncated"))
                run.conv.replace_last_result(kept + "\n" + case.terse)
            else:
                run.conv.replace_last_result(case.terse)
    first_model = len(run.conv.calls)
    answer: str | None = None
    first_reply_calls: int | None = None
    for _turn in range(case.max_turns):
        reply = run.conv.ask(stream=True, max_tokens=case.max_tokens)
        note_reply(run, reply, stream=True)
        if first_reply_calls is None:
            first_reply_calls = len(reply.tool_calls)
        if not reply.tool_calls:
            answer = reply.text
            break
        for made_call in reply.tool_calls:
            run.conv.dispatch(made_call)
    res.answer = clip(answer)
    made = [rec for rec in run.conv.calls[first_model:] if rec.source == "model"]
    if case.stop:
        denied_again = any(rec.code == "policy_denied" for rec in made)
        res.fixed_at_1 = first_reply_calls == 0
        res.fixed_at_3 = answer is not None and not denied_again
        res.fits = res.fixed_at_1
    else:
        res.fixed_at_1 = bool(made) and any(_matches(run, m, made[0]) for m in case.fix)
        res.fixed_at_3 = any(_matches(run, m, rec) for rec in made[:3] for m in case.fix)
        res.fits = bool(made) and any(_matches(run, m, made[0]) for m in (*case.fix, *case.fit))
    # an unchanged retry straight after the error (after a re-read, the same call can be right)
    res.repeated = failing is not None and bool(made) and made[0].key == failing.key
    res.checks["fixed_within_3"] = bool(res.fixed_at_3)
    res.checks["no_repeat"] = not res.repeated
    if not res.fixed_at_3:
        what = "; ".join(f"{rec.name} {clip(run.hide(rec.arguments), 150)} -> {rec.code or 'ok'}" for rec in made[:3])
        res.evidence.append(f"not fixed within 3 calls ({what or 'no call: ' + repr(clip(run.hide(answer), 150))})")
    if res.repeated:
        res.evidence.append("repeated the failed call unchanged")
    _end_state(run, answer)
    _record_calls(run)
    res.passed = all(res.checks.values())
    run.conv.end(answer, "probe: recovery case scored")
