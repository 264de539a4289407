"""The capability probe: a model must pass it before it serves a site.

It runs the site's real stack (provider, chat template, tool-call parser,
vLLM flags, Abhed's own tools, schemas and error messages) through five case
families (wire, decide, steps, recovery, tasks), scores each case by its own
rule on the call's shape or the end state, and gates: hard gates refuse
outright, the catalog entry's bar sets family rates, and a baseline report
(the site's current model) sets the soft gate.  See docs/probe.md.

Public surface: :func:`run_probe` and :class:`ProbeOptions`, the report
(:class:`ProbeReport`, :func:`load_report`, :func:`render_table`,
:func:`report_json`), the cases (:func:`load_cases`, :class:`Case`), and the
scripted models for tests in :mod:`appliance.probe.scripted`.

Errors: :class:`ProbeError` (under ``AbhedError``): the probe could not run.
A model that fails is a report with ``passed: false``, not an error.

Names load on first use (PEP 562), like the other appliance subpackages.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:  # "X as X": an explicit re-export, so other packages type-check
    from appliance.probe._cases import Case as Case
    from appliance.probe._cases import load_cases as load_cases
    from appliance.probe._errors import ProbeError as ProbeError
    from appliance.probe._report import ProbeReport as ProbeReport
    from appliance.probe._report import load_report as load_report
    from appliance.probe._report import render_table as render_table
    from appliance.probe._report import report_json as report_json
    from appliance.probe._runner import ProbeOptions as ProbeOptions
    from appliance.probe._runner import run_probe as run_probe

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "Case": "appliance.probe._cases",
    "ProbeError": "appliance.probe._errors",
    "ProbeOptions": "appliance.probe._runner",
    "ProbeReport": "appliance.probe._report",
    "load_cases": "appliance.probe._cases",
    "load_report": "appliance.probe._report",
    "render_table": "appliance.probe._report",
    "report_json": "appliance.probe._report",
    "run_probe": "appliance.probe._runner",
}

# A literal list: mypy reads re-exports from it, not from sorted(_EXPORTS).
__all__ = [
    "Case",
    "ProbeError",
    "ProbeOptions",
    "ProbeReport",
    "load_cases",
    "load_report",
    "render_table",
    "report_json",
    "run_probe",
]

if not typing.TYPE_CHECKING:  # mypy sees the imports above, not a catch-all
    from appliance._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, _EXPORTS, globals())
