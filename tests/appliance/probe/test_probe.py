"""The capability probe against scripted models: the good one passes, each bad one fails right.

The scripted models are :mod:`appliance.probe.scripted` on a real HTTP socket
(``models.scripted.ScriptedServer``), so the real client, stream assembly, dispatcher,
policy, bwrap sandbox and event log are all in the path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.compose import Config
from appliance.events import EventStore
from appliance.probe import (
    ProbeError,
    ProbeOptions,
    ProbeReport,
    load_cases,
    load_report,
    render_table,
    run_probe,
)
from appliance.probe.scripted import ReferenceModel
from models import ProbeBar
from models.scripted import ScriptedServer, ScriptStep
from tests.helpers import wait_for

PARSER = "hermes"


def _config(home: Path, base_url: str, *, probe: dict[str, Any] | None = None,
            sampling: tuple[str, ...] = ("temperature", "seed"),
            params: dict[str, Any] | None = None) -> Config:
    entry: dict[str, Any] = {"name": "m", "served_name": "m", "weights_dir": str(home),
                             "tool_call_parser": PARSER, "max_model_len": 16384}
    if probe is not None:
        entry["probe"] = probe
    (home / "catalog.json").write_text(json.dumps({"models": [entry]}))
    raw = {"custom_providers": [{"name": "p", "api": "openai", "base_url": base_url, "model": "m",
                                 "sampling": list(sampling), "catalog_entry": "m", "max_retries": 2,
                                 "params": params or {}}],
           "sandbox": {"backend": "bwrap"}}
    (home / "config.json").write_text(json.dumps(raw))
    return Config.model_validate(raw)


def _probe(home: Path, behaviour: str = "good", **opts: Any) -> tuple[ProbeReport, ScriptedServer]:
    probe_bar = opts.pop("bar", None)
    cfg = opts.pop("config", {})
    with ScriptedServer(responder=ReferenceModel(behaviour), model="m") as srv:
        config = _config(home, srv.base_url, probe=probe_bar, **cfg)
        store = EventStore(home / "events.db")
        try:
            report = run_probe(config, store, options=ProbeOptions(**opts))
        finally:
            store.close()
    return report, srv


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProbeReport, Path]]:
    home = tmp_path_factory.mktemp("probe-good")
    old = os.environ.get("ABHED_HOME")
    os.environ["ABHED_HOME"] = str(home)
    try:
        report, _ = _probe(home)
    finally:
        if old is None:
            del os.environ["ABHED_HOME"]
        else:
            os.environ["ABHED_HOME"] = old
    yield report, home


def test_the_good_scripted_model_passes_every_family(good: tuple[ProbeReport, Path]) -> None:
    report, _ = good
    failing = [(r.case, r.variant, r.error, r.evidence) for r in report.runs if not r.passed and not r.skipped]
    assert failing == []
    assert report.passed, render_table(report)
    assert report.families == ["wire", "decide", "steps", "recovery", "tasks"]
    assert {s.family for s in report.scores} == set(report.families)
    assert all(s.cases.rate == 1.0 for s in report.scores)
    assert not any(r.skipped for r in report.runs)  # near-context ran: the entry gives max_model_len
    decide = report.score("decide")
    assert decide is not None and decide.extra["macro_f1"] == 1.0
    assert report.tool_call_parser == PARSER and report.catalog_entry == "m"
    # every case's reference passes its own rule
    assert {r.case for r in report.runs} == {c.id for c in load_cases()}


def test_recovery_runs_both_variants_and_reports_the_gap_per_fault(good: tuple[ProbeReport, Path]) -> None:
    report, _ = good
    faults = {c.fault for c in load_cases() if c.family == "recovery" and not c.transient_503}
    assert {g.fault for g in report.gaps} == faults
    for g in report.gaps:
        assert g.real.total == g.terse.total == 1 and g.gap == 0.0
    variants = {(r.case, r.variant) for r in report.runs if r.family == "recovery"}
    assert ("recovery.stale-file", "terse") in variants and ("recovery.provider-503", "terse") not in variants
    tasks = [r for r in report.runs if r.family == "tasks"]
    assert len(tasks) == 3 * ProbeBar().repeats


def test_the_report_is_well_formed_json_and_a_table(good: tuple[ProbeReport, Path], tmp_path: Path) -> None:
    report, _ = good
    out = tmp_path / "r.json"
    out.write_text(report.model_dump_json())
    again = load_report(out)
    assert again.passed and again.format == "abhed-probe-report/1"
    table = render_table(report)
    assert table.startswith("abhed probe: PASSED")
    for word in ("wire", "decide", "steps", "recovery", "tasks", "gates:", "Wilson"):
        assert word in table
    assert report.wall_s > 0 and report.prompt_tokens > 0


def test_the_probe_is_one_session_in_the_event_log(good: tuple[ProbeReport, Path]) -> None:
    report, home = good
    store = EventStore(home / "events.db")
    try:
        store.verify()
        events = [s.event for s in store.events(report.session_id)]
    finally:
        store.close()
    kinds = {e.type for e in events}
    assert {"session_started", "run_started", "model_turn", "action", "observation", "run_ended"} <= kinds
    started = events[0]
    assert started.type == "session_started" and started.settings["probe"]["families"] == report.families
    injected = [e for e in events if e.type == "action" and e.source == "probe"]
    assert any(e.tool == "cat" for e in injected)  # the unknown-tool case's injected call, marked as the probe's


@pytest.mark.parametrize(("behaviour", "finding", "gate"), [
    ("text_calls", "come back as text", "no_tool_call_as_text"),
    ("broken_stream", "Streamed tool calls differ", "stream_equals_non_stream"),
    ("loops", "repeats a failed call unchanged", "no_failed_call_thrice"),
    ("ignores_denial", "After a policy denial the model tried again", "no_retry_after_denial"),
    ("no_tools", "without calling a tool", "bar:wire"),
])
def test_each_bad_model_fails_with_the_right_finding(abhed_home: Path, behaviour: str, finding: str,
                                                     gate: str) -> None:
    report, _ = _probe(abhed_home, behaviour, quick=True)
    assert not report.passed
    assert any(finding in f.text for f in report.findings), [f.text for f in report.findings]
    assert [g.name for g in report.gates if not g.passed and g.name == gate] == [gate]


def test_text_calls_name_the_parser_the_markup_needs_and_the_one_served(abhed_home: Path) -> None:
    report, _ = _probe(abhed_home, "text_calls", families=("wire",))
    text = next(f.text for f in report.findings if "come back as text" in f.text)
    assert "`--tool-call-parser hermes`" in text and "`qwen3_coder`" in text
    assert '"tool_call_parser": "qwen3_coder"' in text


def test_ignoring_a_denial_fails_only_the_denial_gate(abhed_home: Path) -> None:
    report, _ = _probe(abhed_home, "ignores_denial", families=("recovery",))
    assert [g.name for g in report.gates if not g.passed] == ["no_retry_after_denial"]


def test_quick_runs_the_bars_quick_families_and_a_family_flag_narrows(abhed_home: Path) -> None:
    report, _ = _probe(abhed_home, quick=True)
    assert report.families == ["wire", "recovery"] and report.quick and report.passed
    assert not any(r.family == "tasks" for r in report.runs)
    report, _ = _probe(abhed_home, families=("decide",))
    assert {r.family for r in report.runs} == {"decide"}


def test_a_bars_quick_cases_are_exactly_what_quick_runs_and_a_family_flag_still_narrows(
        abhed_home: Path) -> None:
    """The site's short gate (the e2e's CPU demo bar): --quick runs the named cases and no
    other, the session records which; an explicit --family is the caller's and wins."""
    bar = {"families": ["wire", "steps"], "quick_families": ["wire", "steps"],
           "quick_cases": ["steps.read-answer", "wire.glob"]}
    report, _ = _probe(abhed_home, quick=True, bar=bar)
    assert sorted(r.case for r in report.runs) == ["steps.read-answer", "wire.glob"]
    report, _ = _probe(abhed_home, quick=True, bar=bar, families=("wire",))
    assert len(report.runs) > 1 and {r.family for r in report.runs} == {"wire"}
    with pytest.raises(ProbeError, match="quick_cases name no quick case steps.nope; quick "
                                         "cases of wire, steps: wire.read"):
        _probe(abhed_home, quick=True, bar={**bar, "quick_cases": ["steps.nope"]})


def test_a_named_tool_choice_bar_names_the_tool_and_says_so(abhed_home: Path) -> None:
    bar = {"families": ["wire"], "quick_families": ["wire"], "min_rate": {}, "tool_choice": "named",
           "note": "a random-weight test model"}
    report, srv = _probe(abhed_home, quick=True, bar=bar)
    assert report.passed
    chat = [r for r in srv.requests if r.get("tools")]
    assert chat and all(isinstance(r.get("tool_choice"), dict) for r in chat)
    assert any("named tool choice" in n for n in report.notes)
    assert any("random-weight" in n for n in report.notes)
    assert not any(g.kind == "bar" for g in report.gates)


def test_requests_carry_the_fixed_seed_and_the_probe_tools(abhed_home: Path) -> None:
    _, srv = _probe(abhed_home, families=("wire",))
    chat = [r for r in srv.requests if r.get("tools")]
    assert chat and all(r.get("seed") == 20261201 for r in chat)
    names = {t["function"]["name"] for r in chat for t in r["tools"]}
    assert {"read", "write", "edit", "glob", "grep", "bash", "probe_ping"} <= names


def test_the_providers_max_tokens_caps_every_cases_budget(abhed_home: Path) -> None:
    _, srv = _probe(abhed_home, families=("wire",))
    assert max(r.get("max_tokens", 0) for r in srv.requests if r.get("tools")) > 64
    _, srv = _probe(abhed_home, families=("wire",),
                    config={"sampling": ("temperature", "seed", "max_tokens"),
                            "params": {"max_tokens": 64}})
    chat = [r for r in srv.requests if r.get("tools")]
    assert chat and all(1 <= r["max_tokens"] <= 64 for r in chat)


def test_a_worse_model_than_the_baseline_fails_the_soft_gate(good: tuple[ProbeReport, Path],
                                                             abhed_home: Path) -> None:
    baseline, _ = good
    report, _ = _probe(abhed_home, "no_tools", families=("decide",), baseline=baseline)
    soft = [g for g in report.gates if g.kind == "soft"]
    assert soft and not soft[0].passed
    assert any("worse than the model this site runs now" in f.text for f in report.findings)


# -- hostile and malformed models -----------------------------------------------

def _hostile(body: dict[str, Any]) -> ScriptStep:
    """Huge text, malformed JSON arguments, tools that do not exist."""
    if body.get("stream"):
        # In pieces of 4 KiB: at the default 8 characters each reply is 37,500 events, and
        # the test spent two minutes streaming them, not judging what came back.
        return ScriptStep(text="x" * 300_000, chunk_chars=4096,
                          tool_calls=[{"name": "read", "arguments": "{not json"}])
    return ScriptStep(tool_calls=[{"name": "no-such-tool\u0000", "arguments": "[1, 2]"},
                                  {"name": "read", "arguments": '{"path": 7}'}])


def test_a_hostile_model_fails_cleanly_with_bounded_evidence(abhed_home: Path) -> None:
    with ScriptedServer(responder=_hostile, model="m") as srv:
        config = _config(abhed_home, srv.base_url)
        store = EventStore(abhed_home / "events.db")
        try:
            report = run_probe(config, store, options=ProbeOptions(quick=True))
            store.verify()
        finally:
            store.close()
    assert not report.passed
    assert not any(r.error and "bug in Abhed" in r.error for r in report.runs)
    assert report.schema_valid.rate < 0.99
    dumped = report.model_dump_json()
    assert len(dumped) < 5_000_000
    assert all(len(r.answer or "") < 3000 for r in report.runs)


def test_a_server_that_errors_is_a_failed_report_not_a_crash(abhed_home: Path) -> None:
    def down(body: dict[str, Any]) -> ScriptStep:
        return ScriptStep(status=500, error="CUDA out of memory")

    with ScriptedServer(responder=down, model="m") as srv:
        config = _config(abhed_home, srv.base_url)
        store = EventStore(abhed_home / "events.db")
        try:
            report = run_probe(config, store, options=ProbeOptions(families=("wire",)))
        finally:
            store.close()
    assert not report.passed
    assert all(r.error and "CUDA out of memory" in r.error for r in report.runs if not r.skipped)
    assert any("did not complete" in f.text for f in report.findings)


# -- the command line -------------------------------------------------------------

def _abhed(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy(), check=False)


def test_cli_passes_the_good_model_and_writes_the_report(abhed_home: Path, tmp_path: Path) -> None:
    with ScriptedServer(responder=ReferenceModel("good"), model="m") as srv:
        _config(abhed_home, srv.base_url)
        out = tmp_path / "reports" / "probe.json"
        proc = _abhed("probe", "--quick", "--out", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith("abhed probe: PASSED")
        runs = len(load_report(out).runs)
        progress = [line for line in proc.stderr.splitlines() if line.startswith("probe: [")]
        assert len(progress) == runs and f"probe: [{runs}/{runs}] " in proc.stderr  # one a run
        assert load_report(out).passed
        proc = _abhed("probe", "--family", "wire", "--json", "--baseline", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["families"] == ["wire"] and report["passed"] is True


def test_probe_ctrl_c_stops_at_once_ends_the_session_and_leaves_no_scratch(
        abhed_home: Path, tmp_path: Path) -> None:
    # The bug: `abhed probe --quick` against a CPU model printed nothing for minutes, ignored
    # Ctrl-C for over 40 s, and, stopped, left /tmp/abhed-probe-* and a session with no end.
    import signal
    import threading

    reference = ReferenceModel("good")
    answered: list[int] = []

    def slow_after_four(body: dict[str, Any]) -> ScriptStep:
        answered.append(1)  # called under the server's lock
        if len(answered) <= 4:
            return reference(body)
        return ScriptStep(hang=True)  # a server whose queue is full: no byte back

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with ScriptedServer(responder=slow_after_four, model="m") as srv:
        _config(abhed_home, srv.base_url)
        proc = subprocess.Popen([sys.executable, "-m", "cli", "probe", "--family", "wire",
                                 "--concurrency", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": str(tmp)})
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        try:
            def progressed() -> bool:
                assert proc.poll() is None, "".join(lines)
                return any(" [1/" in line for line in lines) and len(answered) >= 6

            # Progress per run, as it ends; then wait until two requests hang in flight.
            wait_for(progressed, 120, what="a progress line and two requests in flight")
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)  # a deadline, not a timing claim
            out = proc.stdout.read()  # type: ignore[union-attr]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(10)
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]
    said = "".join(lines)
    assert proc.returncode == 130, said
    assert out == ""  # no report
    start = next(line for line in lines if line.startswith("probe: ") and " runs of " in line)
    assert "Ctrl-C stops it" in start
    assert "abhed probe: stopping: closing the requests in flight" in said
    assert "abhed probe: the probe was interrupted (Ctrl-C) after " in said
    assert "Traceback" not in said
    assert list(tmp.iterdir()) == []  # the scratch folder went, as docs/probe.md says
    sid = start.split("; session ", 1)[1].split(";", 1)[0]
    store = EventStore(abhed_home / "state" / "events.db")
    try:
        events = [e.event for e in store.events(sid)]
    finally:
        store.close()
    assert events[-1].type == "session_ended"
    assert events[-1].reason == "probe interrupted (Ctrl-C)"  # type: ignore[union-attr]
    assert [e.reason for e in events if e.type == "run_ended"].count(  # type: ignore[union-attr]
        "interrupted") == 2  # the two requests in flight were cancelled, not waited for


def test_cli_exits_1_for_a_bad_model_with_findings_on_stdout(abhed_home: Path) -> None:
    with ScriptedServer(responder=ReferenceModel("text_calls"), model="m") as srv:
        _config(abhed_home, srv.base_url)
        proc = _abhed("probe", "--family", "wire")
    assert proc.returncode == 1
    assert "FAILED" in proc.stdout and "come back as text" in proc.stdout


@pytest.mark.parametrize("content", ["", "{not json", json.dumps({"format": "x"}), "[" * 100_000,
                                     "x" * 2_000_000],
                         # short ids: pytest puts the id in PYTEST_CURRENT_TEST, and a
                         # 2 MB id makes every subprocess fail with E2BIG
                         ids=["empty", "not-json", "wrong-format", "deep-nesting", "2MB"])
def test_cli_refuses_a_baseline_that_is_not_a_report(abhed_home: Path, tmp_path: Path, content: str) -> None:
    bad = tmp_path / "baseline.json"
    bad.write_text(content)
    proc = _abhed("probe", "--baseline", str(bad))
    assert proc.returncode == 2
    assert f"baseline report {bad}: " in proc.stderr and "Traceback" not in proc.stderr
    assert "written by `abhed probe --out`" in proc.stderr


def test_cli_usage_errors(abhed_home: Path) -> None:
    proc = _abhed("probe")
    assert proc.returncode == 2 and "no model provider is configured" in proc.stderr
    (abhed_home / "config.json").write_text(json.dumps({"custom_providers": [
        {"name": "p", "api": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
         "max_retries": 0, "connect_timeout_s": 1}]}))
    proc = _abhed("probe", "--provider", "nope")
    assert proc.returncode == 2 and "no provider named 'nope'" in proc.stderr
    proc = _abhed("probe", "--family", "vibes")
    assert proc.returncode == 2
    proc = _abhed("probe", "--quick")
    assert proc.returncode == 4 and "cannot be reached" in proc.stderr


# -- the pieces ---------------------------------------------------------------------

def test_wilson_intervals_and_macro_f1() -> None:
    from appliance.probe._score import macro_f1, rate, wilson

    low, high = wilson(5, 5)
    assert round(low, 3) == 0.566 and high == 1.0
    assert wilson(0, 0) == (0.0, 1.0)
    r = rate([True, False, True, True])
    assert (r.passed, r.total, r.rate) == (3, 4, 0.75) and r.low < 0.75 < r.high
    assert macro_f1(["call", "ask", "answer"], ["call", "ask", "answer"]) == 1.0
    assert macro_f1(["call", "ask", "answer"], ["call", "call", "call"]) == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        macro_f1(["call"], [])


@pytest.mark.parametrize(("text", "parser"), [
    ("<tool_call>\n<function=read>\n<parameter=path>\n/x\n</parameter>\n</function>\n</tool_call>",
     "qwen3_coder"),
    ('<tool_call>\n{"name": "read", "arguments": {"path": "/x"}}\n</tool_call>', "hermes"),
    ('[TOOL_CALLS]read[ARGS]{"path": "/x"}', "mistral"),
    ("<tool_call>read\n<arg_key>path</arg_key><arg_value>/x</arg_value></tool_call>", "glm45"),
    ('<|python_tag|>{"name": "read", "parameters": {}}', "llama3_json"),
    ('{"name": "read", "arguments": {"path": "/x"}}', "llama3_json"),
    ("<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0", "kimi_k2"),
    ("<|channel|>commentary to=functions.read", "openai"),
])
def test_markup_names_the_parser_that_reads_it(text: str, parser: str) -> None:
    from appliance.probe._markup import detect_markup

    found = detect_markup(text)
    assert found is not None and found[1] == parser


@pytest.mark.parametrize("text", ["", "The file says hello.", "Which file? {not a call}", "x" * 100_000],
                         ids=["empty", "prose", "question", "100KB"])
def test_plain_text_is_not_markup(text: str) -> None:
    from appliance.probe._markup import detect_markup

    assert detect_markup(text) is None


@pytest.mark.parametrize("bad", [{"families": ["vibes"]}, {"quick_families": []},
                                 {"min_rate": {"wire": 1.5}}, {"min_rate": {"nope": 0.5}},
                                 {"tool_choice": "required"}, {"repeats": 0}, {"extra": 1},
                                 {"quick_cases": ["read-answer"]}, {"quick_cases": ["vibes.x"]},
                                 {"quick_cases": ["steps.a", "steps.a"]},
                                 {"quick_cases": ["steps.read-answer"]},  # steps is not quick
                                 {"quick_cases": ["wire.x" + "y" * 100]},
                                 {"quick_cases": [f"wire.c{i}" for i in range(65)]}])
def test_a_bad_bar_in_the_catalog_is_refused(bad: dict[str, Any]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ProbeBar.model_validate(bad)


def test_an_empty_bar_names_the_families_to_choose_from() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="at least one family; name some of: wire"):
        ProbeBar.model_validate({"quick_families": []})


def test_the_tiny_test_preset_declares_its_honest_bar(tmp_path: Path) -> None:
    from models import entry_from_preset

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    entry = entry_from_preset(tmp_path, "tiny-test")
    assert entry.probe.tool_choice == "named" and entry.probe.families == ("wire",)
    assert entry.probe.min_rate == {}
    small = entry_from_preset(tmp_path, "smollm2").probe
    assert (small.tool_choice, small.families, small.min_rate) == ("named", ("wire",), {})
    assert entry_from_preset(tmp_path, "qwen3-coder").probe == ProbeBar()


def test_every_case_is_well_formed_and_prompts_do_not_shadow_each_other() -> None:
    cases = load_cases()
    prompts = [c.prompt for c in cases]
    for c in cases:
        assert c.reference, c.id
        others = [p for p in prompts if p != c.prompt]
        assert not any(p.endswith(c.prompt) for p in others), c.id
    families = {c.family for c in cases}
    assert families == {"wire", "decide", "steps", "recovery", "tasks"}
    assert {c.expect for c in cases if c.family == "decide"} == {"call", "answer", "ask"}
    assert sum(1 for c in cases if c.family == "recovery") >= 10
