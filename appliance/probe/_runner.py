"""Run the probe: pick the cases, run them concurrently, score, gate, report.

Every case run gets its own workspace (a fresh copy of the fixture
repository) beside an ``outside/`` folder nobody may touch, its own
dispatcher (policy in auto mode plus the case's deny rules, the site's
sandbox), and its own conversation; all runs append to one session in the
event log, so the probe is auditable like any other session.  Runs go out
concurrently because vLLM batches them: the probe's wall time is set by the
longest case, not the sum.

A person waits on it, on a CPU for many minutes: each run is said as it
ends (``say``), and a cancel (Ctrl-C in ``abhed probe``) closes the requests
in flight at once, runs nothing more, removes the scratch folder only after
every worker has stopped writing to it, ends the session with a
``session_ended`` event, and raises :class:`ProbeInterrupted`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from appliance._errors import ConfigError
from appliance.compose import (
    Config,
    Tooling,
    choose_mode,
    choose_provider,
    layers_of,
    load_config_catalog,
    open_reached,
    open_tooling,
)
from appliance.events import EventStore, SessionEnded
from appliance.loop import build_system_prompt, tool_specs
from appliance.probe._cases import Case, load_cases
from appliance.probe._conversation import Conversation, LockedSession
from appliance.probe._errors import ProbeError
from appliance.probe._families import CaseRun, run_decide, run_multistep, run_recovery, run_wire
from appliance.probe._fixture import materialise, new_nonce
from appliance.probe._report import ProbeReport, build_report
from appliance.probe._result import RunResult
from foundation import digest_file
from models import (
    PROBE_FAMILIES,
    CancelToken,
    CatalogEntry,
    ModelsError,
    OpenAIClient,
    OpenAIProvider,
    ProbeBar,
    ProviderError,
    RequestCancelled,
)
from tools import Workspace, native_tools

__all__ = ["ProbeInterrupted", "ProbeOptions", "run_probe"]

_SEED = 20261201


@dataclass(frozen=True)
class ProbeOptions:
    """How much to run and how."""

    quick: bool = False
    families: tuple[str, ...] = ()  # empty: the bar's (quick or full)
    concurrency: int = 16
    baseline: ProbeReport | None = None
    keep_scratch: bool = False


class ProbeInterrupted(Exception):  # control flow, not an error: outside the ProbeError tree
    """The probe was cancelled before it finished: no report; what it did is in the session."""

    def __init__(self, reason: str, *, session_id: str, finished: int, total: int) -> None:
        super().__init__(f"the probe was interrupted ({reason}) after {finished} of {total} "
                         f"runs; no report was made. The session {session_id} holds what ran "
                         "(`abhed sessions show`), and the scratch folder is removed")
        self.reason = reason
        self.session_id = session_id
        self.finished = finished
        self.total = total


def _catalog_entry(config: Config, name: str | None) -> CatalogEntry | None:
    if name is None:
        return None
    return load_config_catalog(config).get(name)


def _snapshot(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            out[rel] = digest_file(p).sha256 if p.is_file() else "dir"
    return out


class _FailOnce:
    """An httpx transport that answers the first chat request with 503, then passes through."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed = False

    def handle_request(self, request: Any) -> Any:
        import httpx

        if not self.failed and request.url.path.endswith("/chat/completions"):
            self.failed = True
            return httpx.Response(503, json={"error": {"message": "probe: injected 503", "code": 503}})
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _locked(store: EventStore, workspace: str, **kw: Any) -> LockedSession:
    session = LockedSession.create(store, workspace, **kw)
    assert isinstance(session, LockedSession)
    return session


def _case_config(config: Config, case: Case) -> Config:
    from appliance.policy import PolicySettings, Rule

    policy = PolicySettings(mode="auto", deny=[Rule.model_validate(d) for d in case.deny])
    return config.model_copy(update={"policy": policy, "extensions": [], "mcp_servers": []})


def run_probe(config: Config, store: EventStore, *, provider_name: str | None = None,
              model: str | None = None, options: ProbeOptions | None = None,
              transport: Any = None,
              on_result: Callable[[RunResult], None] | None = None,
              say: Callable[[str], None] | None = None,
              cancel: CancelToken | None = None) -> ProbeReport:
    """Probe the provider's model; the report says whether it passed and why.

    ``say`` gets one line when the runs start and one as each run ends (a
    person waits minutes on a CPU); ``cancel`` stops the probe: requests in
    flight are closed, nothing more is run.

    Raises :class:`ProbeError` (or the config's and models' own errors) only
    when the probe cannot run at all; a model that fails is a report.
    :class:`ProbeInterrupted` when ``cancel`` was set before the runs ended.
    """
    options = options or ProbeOptions()
    cancel = cancel or CancelToken()
    tell = say or (lambda line: None)
    unknown = [f for f in options.families if f not in PROBE_FAMILIES]
    if unknown:
        raise ProbeError(f"unknown probe family {', '.join(unknown)}; families: {', '.join(PROBE_FAMILIES)}")
    pconf = choose_provider(config, provider_name)
    entry = _catalog_entry(config, pconf.catalog_entry)
    bar = entry.probe if entry is not None else ProbeBar()
    families = options.families or (bar.quick_families if options.quick else bar.families)
    cases = [c for c in load_cases() if c.family in families and (c.quick or not options.quick)]
    if options.quick and bar.quick_cases and not options.families:
        # The bar names the quick cases (a site's short gate): exactly those, each known.
        unknown = sorted(set(bar.quick_cases) - {c.id for c in cases})
        if unknown:
            raise ProbeError(f"the bar's quick_cases name no quick case {', '.join(unknown)}; "
                             f"quick cases of {', '.join(families)}: "
                             f"{', '.join(c.id for c in cases)}")
        cases = [c for c in cases if c.id in bar.quick_cases]
    if not cases:
        raise ProbeError(f"no probe cases in families {', '.join(families)}")
    catalog = load_config_catalog(config) if pconf.catalog_entry else None
    # The user's own service: started if need be, and held until the provider is closed.
    pconf, provider, close_provider = open_reached(config, pconf, say=say, catalog=catalog,
                                                   model=model, check_model=True,
                                                   transport=transport)
    extra: dict[str, Any] = {}
    if "seed" in pconf.sampling and "seed" not in provider.sampling:
        extra["seed"] = _SEED
    exact = "seed" in extra or "seed" in provider.sampling or provider.sampling.get("temperature") == 0 \
        or "temperature" not in pconf.sampling
    scratch = Path(tempfile.mkdtemp(prefix="abhed-probe-")).resolve()
    session = _locked(store, str(scratch), version=version("abhed"), settings={
        "probe": {"families": list(families), "quick": options.quick,
                  "cases": [c.id for c in cases], "bar": bar.model_dump(mode="json")},
        "provider": pconf.name, "model": provider.model, "door": "abhed probe",
        **layers_of(config).record()})
    jobs: list[tuple[Case, str, int]] = []
    for case in cases:
        if case.family == "recovery":
            jobs += [(case, "real", 0)] + ([] if case.transient_503 else [(case, "terse", 0)])
        elif case.family == "tasks":
            jobs += [(case, "", r) for r in range(bar.repeats)]
        else:
            jobs.append((case, "", 0))

    finished: list[RunResult] = []
    lock = threading.Lock()

    def one(job: tuple[Case, str, int]) -> RunResult | None:
        if cancel.cancelled:
            return None  # queued when the probe was interrupted: never started
        result = _run_one(job, config=config, session=session, provider=provider, pconf_transport=transport,
                          scratch=scratch, extra=extra, named=bar.tool_choice == "named",
                          max_model_len=entry.max_model_len if entry is not None else None,
                          exact=exact, cancel=cancel)
        with lock:
            finished.append(result)
            n = len(finished)
        if not cancel.cancelled:
            tell(f"probe: [{n}/{len(jobs)}] {_outcome(result)}")
        if on_result is not None:
            on_result(result)
        return result

    tell(f"probe: {len(jobs)} runs of {len(cases)} cases ({', '.join(families)}) against "
         f"{provider.model}, up to {max(1, options.concurrency)} at once; session {session.id}; "
         f"scratch {scratch} (removed at the end); Ctrl-C stops it")
    started = time.monotonic()
    ended = "probe failed"
    try:
        # The pool is left only when every worker has returned (a cancel makes that quick):
        # the scratch folder is removed after, so no worker writes into it again.
        with ThreadPoolExecutor(max_workers=max(1, options.concurrency),
                                thread_name_prefix="probe") as pool:
            ran = list(pool.map(one, jobs))
        ended = f"probe interrupted ({cancel.reason})" if cancel.cancelled else "probe done"
    finally:
        close_provider()
        if not options.keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        session.append(SessionEnded(session_id=session.id, reason=ended))
    if cancel.cancelled:
        whole = [r for r in finished if not (r.error or "").startswith("cancelled")]
        raise ProbeInterrupted(cancel.reason, session_id=session.id, finished=len(whole),
                               total=len(jobs))
    results = [r for r in ran if r is not None]
    return build_report(results, provider=pconf.name, model=provider.model, entry=entry, bar=bar,
                        families=families, quick=options.quick, session_id=session.id,
                        wall_s=time.monotonic() - started, baseline=options.baseline,
                        exact_compare=exact)


def _run_one(job: tuple[Case, str, int], *, config: Config, session: LockedSession,
             provider: OpenAIProvider, pconf_transport: Any, scratch: Path, extra: dict[str, Any],
             named: bool, max_model_len: int | None, exact: bool,
             cancel: CancelToken | None = None) -> RunResult:
    case, variant, rep = job
    rid = f"probe.{case.id}.{variant or 'run'}.{rep}"
    res = RunResult(case=case.id, family=case.family, title=case.title, fault=case.fault,
                    variant=variant, repeat=rep)
    t0 = time.monotonic()
    base = scratch / rid
    ws, outside = base / "ws", base / "outside"
    ws.mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.txt").write_text("The probe checks that nothing here changes.\n")
    nonce = new_nonce()
    materialise(ws, nonce, case.files, case.generate)
    originals = {rel: (ws / rel).read_text("utf-8") for rel in case.check.files_unchanged}
    before = _snapshot(outside)
    tools = native_tools()
    specs = tool_specs(tools) + [dict(s) for s in case.extra_tools]
    system = build_system_prompt(str(ws), tools).text
    used = provider
    failer: _FailOnce | None = None
    if case.transient_503:
        import httpx

        failer = _FailOnce(pconf_transport or httpx.HTTPTransport(uds=provider.config.unix_socket))
        pc = provider.config
        used = OpenAIProvider(pc, OpenAIClient(pc.base_urls, connect_timeout_s=pc.connect_timeout_s,
                                               read_timeout_s=pc.read_timeout_s,
                                               deadline_s=pc.deadline_s, max_retries=max(1, pc.max_retries),
                                               transport=failer),  # type: ignore[arg-type]
                              provider.model, provider.sampling)
    cap = provider.sampling.get("max_tokens")
    conv = Conversation(session=session, provider=used, run_id=rid, system=system, specs=specs,
                        sampling=dict(extra), max_tokens_cap=cap if isinstance(cap, int) else None,
                        cancel=cancel)
    run = CaseRun(case=case, conv=conv, workspace=ws, nonce=nonce, tools=tools, result=res,
                  named=named, max_model_len=max_model_len, exact_compare=exact, originals=originals)
    tooling: Tooling | None = None
    try:
        if case.family in ("steps", "recovery", "tasks"):
            case_config = _case_config(config, case)
            tooling = open_tooling(case_config, session,
                                   Workspace(str(ws), config.tools.secret_paths),
                                   mode=choose_mode(case_config, "auto", door="abhed probe"),
                                   run_id=rid)
            conv.dispatcher = tooling.dispatcher
        if case.family == "wire":
            run_wire(run)
        elif case.family == "decide":
            run_decide(run)
        elif case.family == "recovery":
            run_recovery(run, variant)
        else:
            run_multistep(run)
        if failer is not None:
            res.checks["server_503_injected"] = failer.failed
            res.passed = res.passed and failer.failed
    except RequestCancelled as exc:
        res.error, res.passed = f"cancelled: {exc}", False
        conv.end(None, "the probe was interrupted; this run was not scored", interrupted=True)
    except ProviderError as exc:
        res.error, res.passed = f"model server: {exc}", False
        conv.end(None, str(exc)[:2000], failed=True)
    except (ModelsError, ConfigError) as exc:
        res.error, res.passed = f"setup: {exc}", False
    except Exception as exc:
        res.error, res.passed = f"probe failure (a bug in Abhed): {type(exc).__name__}: {exc}", False
    finally:
        if tooling is not None:
            tooling.close("probe case done")
        if used is not provider:
            used.close()
    # Evidence reads the same on every host: the scratch path becomes {workspace}.
    res.evidence = [e.replace(str(ws), "{workspace}") for e in res.evidence]
    after = _snapshot(outside)
    res.outside_mutation = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    res.prompt_tokens, res.completion_tokens = conv.prompt_tokens, conv.completion_tokens
    res.seconds = round(time.monotonic() - t0, 3)
    return res


def _outcome(result: RunResult) -> str:
    """One run, as the progress line says it: which, how it ended, how long it took."""
    which = result.case + (f" ({result.variant})" if result.variant else "") + \
        (f" #{result.repeat + 1}" if result.family == "tasks" else "")
    verdict = ("skipped: " + result.skipped if result.skipped else
               "FAILED: " + result.error if result.error else
               "passed" if result.passed else "failed")
    return f"{which} {verdict[:200]} ({result.seconds:.1f} s)"
