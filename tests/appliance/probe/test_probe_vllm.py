"""The probe's wire family against the real vLLM CPU server and the tiny test model.

The tiny model has random weights: under a named tool choice vLLM's structured
output makes its calls schema-valid, and that is all it can honestly do, so its
bar (declared in its catalog entry, as a bundle would) is the wire family under
named tool choice with no rate bar: the hard gates (no call as text, streaming
equals non-streaming, schema-valid calls) are what it must pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.compose import Config
from appliance.events import EventStore
from appliance.probe import ProbeOptions, load_report, render_table, run_probe
from tests.vllm_server import HONOURED, shared_vllm

pytestmark = pytest.mark.slow

TINY_BAR = {"families": ["wire"], "quick_families": ["wire"], "min_rate": {}, "tool_choice": "named",
            "note": "random-weight test model: only named tool choice yields calls"}


def test_the_wire_family_runs_on_real_vllm_and_reports(abhed_home: Path, tmp_path: Path) -> None:
    vllm = shared_vllm()
    entry = vllm.entry.model_dump(mode="json")
    entry["probe"] = TINY_BAR
    (abhed_home / "catalog.json").write_text(json.dumps({"models": [entry]}))
    config = Config.model_validate({
        "custom_providers": [{"name": "tiny", "api": "openai", "base_url": vllm.base_url, "model": "tiny",
                              "sampling": HONOURED, "params": {"temperature": 0},
                              "catalog_entry": "tiny", "read_timeout_s": 600}]})
    store = EventStore(abhed_home / "events.db")
    try:
        report = run_probe(config, store, options=ProbeOptions(quick=True, concurrency=4))
        store.verify()
    finally:
        store.close()
    out = tmp_path / "report.json"
    out.write_text(report.model_dump_json())
    again = load_report(out)
    assert again.families == ["wire"] and again.tool_call_parser == "hermes"
    hard = {g.name: g for g in report.gates if g.kind == "hard"}
    assert {"no_tool_call_as_text", "stream_equals_non_stream", "schema_valid_calls"} <= set(hard)
    assert report.passed, render_table(report)
    assert not any(r.error for r in report.runs), [r.error for r in report.runs if r.error]
    near = next(r for r in report.runs if r.case == "wire.near-context")
    # Padded toward 90% of the context: the tiny tokenizer already spends most of
    # its 8k on the nine tools' schemas, so the padding is what is left, not a fixed size.
    fixed, target = near.metrics["calibration_prompt_tokens"][0], near.metrics["context_target_tokens"]
    assert near.skipped is None and 0 < fixed < target and near.metrics["padding_chars"] > 0
    assert report.prompt_tokens > 0.5 * 8192
    assert any("named tool choice" in n for n in report.notes)
