"""What this installation is, and what in it needs a fix: ``abhed doctor`` and the TUI's ``/doctor``.

Every finding comes from the check that owns it, called, never copied: the
effective settings and the site layer (:func:`appliance.compose.load_config`,
:func:`~appliance.compose.layers_of`, as ``abhed config show``), the provider
(:func:`~appliance.compose.choose_provider`, the on-demand service's
:class:`models.LocalService`, or a real ``/v1/models`` through
:func:`models.open_provider`), the catalog
(:func:`~appliance.compose.load_config_catalog`), the sandbox
(:func:`appliance.sandbox.check_backends`, as ``abhed sandbox check --no-boot``,
and :func:`~appliance.sandbox.kvm_status`) and the event log
(:func:`appliance.events.maintenance.verify_log`, as ``abhed events verify``).

Nothing is started, booted or written: a model service that starts on demand is
reported as such, not started; the sandbox is checked without a boot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Finding", "Report", "examine"]

Status = Literal["ok", "problem", "note"]


@dataclass(frozen=True)
class Finding:
    """One thing looked at: its area, what was found, and for a problem the fix."""

    area: str
    status: Status
    summary: str
    fix: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    """All findings; ``could_not_look`` names the areas whose check itself failed."""

    findings: list[Finding] = field(default_factory=list)
    could_not_look: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 all is well, 1 something needs a fix, 2 a check could not look."""
        if self.could_not_look:
            return 2
        return 1 if any(f.status == "problem" for f in self.findings) else 0

    def as_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "could_not_look": self.could_not_look,
                "findings": [asdict(f) for f in self.findings]}

    def lines(self) -> list[str]:
        """The plain report: one line per finding, a fix under each problem."""
        mark = {"ok": "ok     ", "problem": "PROBLEM", "note": "note   "}
        out: list[str] = []
        for f in self.findings:
            out.append(f"{mark[f.status]} {f.area:9} {f.summary}")
            if f.fix:
                out.append(f"{'':17}fix: {f.fix}")
        for area in self.could_not_look:
            out.append(f"ERROR   {area:9} could not look (see above)")
        verdict = {0: "all is well", 1: "something needs a fix", 2: "some checks could not look"}
        out.append(f"doctor: {verdict[self.exit_code]}")
        return out


def _look(report: Report, area: str, check: Callable[[], list[Finding]]) -> None:
    """Run one area's check; a check that raises is reported as one that could not look."""
    try:
        report.findings.extend(check())
    except Exception as exc:  # a doctor reports a broken check; it does not crash on one
        report.findings.append(Finding(area, "problem", f"the check failed: {type(exc).__name__}: "
                                       f"{str(exc)[:500]}"))
        report.could_not_look.append(area)


def examine(config_path: Path | None = None) -> Report:
    """Look at this installation (ABHED_HOME, the site layer, ``config_path``) and report.

    Never raises for what it finds; each area whose own check fails is named in
    :attr:`Report.could_not_look` (exit 2).
    """
    from appliance._errors import AbhedError
    from appliance.compose import load_config

    report = Report()
    try:
        config = load_config(config_path)
    except AbhedError as exc:
        report.findings.append(Finding("settings", "problem", str(exc).split("\n")[0][:500],
                                       fix="correct the file it names (docs/configuration.md)"))
        config = None
    if config is not None:
        _look(report, "settings", lambda: _settings(config))
        _look(report, "model", lambda: _model(config))
        _look(report, "sandbox", lambda: _sandbox(config))
    _look(report, "event log", _event_log)
    return report


def _settings(config: Any) -> list[Finding]:
    from appliance._home import abhed_home
    from appliance.compose import layers_of

    layered = layers_of(config)
    home = abhed_home()
    mine = str(config.user_file) if config.user_file else f"{home / 'config.json'} (not present)"
    if layered.site is None:
        return [Finding("settings", "note",
                        f"no site layer (a development checkout or a personal install): your own "
                        f"settings are the whole policy; ABHED_HOME {home}, settings {mine}",
                        detail={"site": None, "home": str(home), "user_file": str(config.user_file)
                                if config.user_file else None})]
    site = layered.site
    return [Finding("settings", "ok",
                    f"site {site.origin.site!r}, release {site.origin.release}, settings "
                    f"{site.settings_file} (sha256 {site.settings_sha256[:16]}...), narrowed by "
                    f"{mine}; ABHED_HOME {home}",
                    detail={"site": site.origin.site, "release": site.origin.release,
                            "settings_file": str(site.settings_file),
                            "settings_sha256": site.settings_sha256, "home": str(home)})]


def _model(config: Any) -> list[Finding]:
    from appliance._errors import ConfigError
    from appliance.compose import choose_provider, load_config_catalog, local_service
    from models import ModelsError, open_provider

    try:
        pconf = choose_provider(config, None)
    except ConfigError as exc:
        return [Finding("model", "problem", str(exc),
                        fix=f"run scripts/demo (a local model, set up for you), or add a provider to "
                            f"{config.source_of('custom_providers')} (docs/providers.md)")]
    found: list[Finding] = []
    catalog = None
    if pconf.catalog_entry is not None:
        try:
            catalog = load_config_catalog(config)
            entry = catalog.get(pconf.catalog_entry)
        except ModelsError as exc:
            return [Finding("catalog", "problem", str(exc),
                            fix="write the entry with `abhed catalog add` (docs/models.md)")]
        weights = entry.weights_path(catalog.base())
        ok = weights.is_dir()
        found.append(Finding(
            "catalog", "ok" if ok else "problem",
            f"entry {entry.name!r} ({entry.served_name}, {entry.max_model_len} tokens, parser "
            f"{entry.tool_call_parser}), weights {weights}" + ("" if ok else ": missing"),
            fix="" if ok else "put the weights back, or point the entry's weights_dir at them",
            detail={"entry": entry.name, "weights": str(weights)}))
    if pconf.start_on_demand:
        svc = local_service(pconf)
        running = svc.answers()
        found.append(Finding(
            "model", "ok",
            f"provider {pconf.name!r}: this user's own service for {svc.name}, "
            + ("running, answers" if running else "not running: it starts when abhed needs it")
            + f" (socket {svc.socket}, only you can reach it; stops after "
            f"{config.serve.idle_stop_s:g} s unused; log {svc.log_path})",
            detail={"provider": pconf.name, "on_demand": True, "running": running,
                    "socket": str(svc.socket), "log": str(svc.log_path)}))
        return found
    where = pconf.unix_socket or ", ".join(pconf.base_urls)
    quick = pconf.model_copy(update={"max_retries": 0, "deadline_s": 15.0,
                                     "connect_timeout_s": min(pconf.connect_timeout_s, 5.0)})
    try:
        provider = open_provider(quick, catalog=catalog, check_model=True)
    except ModelsError as exc:
        found.append(Finding("model", "problem", f"provider {pconf.name!r} at {where} does not answer "
                             f"as it should: {str(exc)[:400]}",
                             fix="start the model service (`abhed serve`, or the site's service: "
                                 "`abhed-installer status` as root), or correct base_url",
                             detail={"provider": pconf.name, "at": where}))
        return found
    provider.close()
    found.append(Finding("model", "ok", f"provider {pconf.name!r} at {where} serves {provider.model}",
                         detail={"provider": pconf.name, "at": where, "model": provider.model}))
    return found


def _sandbox(config: Any) -> list[Finding]:
    from appliance.sandbox import check_backends, kvm_status

    settings = config.sandbox
    reports = {r.backend: r for r in check_backends(settings, boot=False)}
    vm, bwrap = reports["microvm"], reports["bwrap"]
    kvm, kvm_why = kvm_status(settings)
    chosen = settings.backend
    detail = {"configured": chosen, "kvm": kvm, "kvm_reason": kvm_why,
              "backends": {k: {"ok": r.ok, "reason": r.reason} for k, r in reports.items()}}
    get_vm = ("build the image: sudo .venv/bin/python -m bundle.image build --recipe default "
              "(root, debootstrap), then link the printed folder to ABHED_HOME/image or set "
              "sandbox.image_dir (docs/sandbox.md)")
    if chosen == "host":
        return [Finding("sandbox", "note", "sandbox.backend is \"host\": the agent's commands run "
                        "UNSANDBOXED on this host", detail=detail)]
    if chosen in ("auto", "microvm") and vm.ok:
        how = "with KVM" if kvm else f"under software emulation: {kvm_why}"
        return [Finding("sandbox", "ok", f"microVM (image present), {how}", detail=detail)]
    if chosen == "microvm":
        return [Finding("sandbox", "problem", f"sandbox.backend is \"microvm\" but {vm.reason}",
                        fix=get_vm, detail=detail)]
    if bwrap.ok:
        status: Status = "ok" if chosen == "bwrap" else "note"
        why = "as configured" if chosen == "bwrap" else f"not the microVM: {vm.reason}"
        return [Finding("sandbox", status, f"bubblewrap ({why}); KVM: {kvm_why}",
                        fix="" if chosen == "bwrap" else f"for the microVM, {get_vm}", detail=detail)]
    return [Finding("sandbox", "problem", f"no sandbox can run here: microvm: {vm.reason}; bwrap: "
                    f"{bwrap.reason}", fix=f"install bubblewrap (apt-get install bubblewrap) or {get_vm}",
                    detail=detail)]


def _event_log() -> list[Finding]:
    from appliance._home import events_db_path
    from appliance.events.maintenance import verify_log

    path = events_db_path()
    if not path.exists():
        return [Finding("event log", "ok", f"{path}: empty (no session yet)", detail={"path": str(path)})]
    report = verify_log(path)
    if report.ok:
        return [Finding("event log", "ok", f"{path}: {report.events} events, the chain and the files "
                        "are sound", detail={"path": str(path), "events": report.events})]
    first = report.problems[0]
    return [Finding("event log", "problem",
                    f"{path}: {len(report.problems)} problem(s), first: {first.what[:300]}",
                    fix="`abhed events verify` names each; `abhed events repair` (docs/event-log.md)",
                    detail={"path": str(path), "problems": len(report.problems)})]
