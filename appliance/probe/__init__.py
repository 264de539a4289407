"""The capability probe: a model must pass it before it serves a site.

It runs the site's real stack (provider, chat template, tool-call parser,
vLLM flags, Abhed's own tools, schemas and error messages) through five case
families (wire, decide, steps, recovery, tasks), scores each case by its own
rule on the call's shape or the end state, and gates: hard gates refuse
outright, the catalog entry's bar sets family rates, and a baseline report
(the site's current model) sets the soft gate.  See docs/probe.md.

Public surface: :func:`run_probe` and :class:`ProbeOptions` (and
:class:`ProbeInterrupted`, raised when it is cancelled: control flow, not an
error), the report
(:class:`ProbeReport`, :func:`load_report`, :func:`render_table`,
:func:`report_json`), the cases (:func:`load_cases`, :class:`Case`), and the
scripted models for tests in :mod:`appliance.probe.scripted`.

Errors: :class:`ProbeError` (under ``AbhedError``): the probe could not run.
A model that fails is a report with ``passed: false``, not an error.
"""

from __future__ import annotations

from appliance.probe._cases import Case, load_cases
from appliance.probe._errors import ProbeError
from appliance.probe._report import ProbeReport, load_report, render_table, report_json
from appliance.probe._runner import ProbeInterrupted, ProbeOptions, run_probe

__all__ = [
    "Case",
    "ProbeError",
    "ProbeInterrupted",
    "ProbeOptions",
    "ProbeReport",
    "load_cases",
    "load_report",
    "render_table",
    "report_json",
    "run_probe",
]
