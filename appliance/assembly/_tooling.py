"""A session's tools, sandbox, extensions, MCP servers and policy, built in one place.

``abhed tool``, the probe, and through :func:`appliance.compose.start_agent`
``abhed run``, ``abhed rpc``, the TUI and every subagent come through here, so a
session has the same tools, the same policy, the same extensions and the same
sandbox whichever door it came in by: an operator's deny rule or
``policy.mode`` cannot be missed because one entry point forgot it.

Everything is opened first and the :class:`tools.ToolContext` and the policy
gate are built last, complete: nothing is set on them afterwards.

What decides a session's calls is recorded as one copy with a digest (a
``decision_basis`` event, built here because the tools offered are known only
once the extensions and MCP servers have answered) and named by digest in
every ``policy_decision``: a decision that says ``deny[2]`` can be resolved
against the rules that were in force, long after ``config.json`` has changed.

What set-up refuses or degrades (an MCP server withheld because its tools no
longer match their pin, an extension dead at start, the sandbox falling back
from microVM to bubblewrap or missing) is recorded as a ``startup_notice``
event and returned in :attr:`Tooling.notices`, for the door to say.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from appliance._dispatch import Dispatcher
from appliance._errors import ConfigError
from appliance._session import Session
from appliance.assembly._config import Config
from appliance.assembly._layers import layers_of
from appliance.events import DecisionBasis, SessionEnded, StartupNotice
from appliance.extensions import ExtensionHost, ExtensionSpec
from appliance.mcp import McpGateway, McpServerSpec
from appliance.policy import (
    MODES,
    Approver,
    Gate,
    Mode,
    ModeChoice,
    ModeRefused,
    PolicyEngine,
    PolicySettings,
    resolve_mode,
)
from appliance.sandbox import SandboxError, open_sandbox
from appliance.sessions import ArtifactStore
from tools import FileLedger, ShellSandbox, Tool, ToolContext, Workspace, native_tools

__all__ = ["NO_SITE", "Notice", "NoticeKind", "Tooling", "allowed_modes", "artifact_store", "choose_mode",
           "decision_basis", "open_tooling", "record_basis"]

_Recorded = Literal["mcp_refused", "extension_dead", "sandbox_fallback", "sandbox_unavailable"]
NoticeKind = _Recorded | Literal["no_site_settings"]
#: Said once per door on a development checkout (not recorded: ``session_started`` says "none").
NO_SITE = ("no site settings apply: neither /etc/abhed/site nor this installation's abhed-site "
           "exists, so this is a development checkout and your own config is the whole policy "
           "(docs/configuration.md, 'The site layer')")


@dataclass(frozen=True)
class Notice:
    """One thing set-up refused or degraded (a ``warning``), or a ``note`` every door says."""

    kind: NoticeKind
    subject: str
    message: str
    level: Literal["warning", "note"] = "warning"

    def line(self) -> str:
        """The one line a CLI door prints on stderr."""
        return f"{self.level}: {self.message}"


def _close_parts(session: Session, reason: str, sandbox: ShellSandbox | None,
                 host: ExtensionHost | None, gateway: McpGateway | None) -> None:
    """Kill background jobs and stop the VM, tell extensions, stop MCP servers, record the end."""
    try:
        if sandbox is not None:
            sandbox.close()
    finally:
        try:
            if host is not None:
                host.close(reason)  # sends session_end first
        finally:
            try:
                if gateway is not None:
                    gateway.close()
            finally:
                session.append(SessionEnded(session_id=session.id, reason=reason))


@dataclass
class Tooling:
    """A session's dispatcher and what it holds open; :meth:`close` releases it all."""

    dispatcher: Dispatcher
    tools: dict[str, Tool]
    ctx: ToolContext
    mode: ModeChoice
    config: Config
    host: ExtensionHost | None = None
    gateway: McpGateway | None = None
    notices: list[Notice] = field(default_factory=list)
    closed: bool = field(default=False, init=False)

    @property
    def gate(self) -> Gate:
        return self.dispatcher.gate

    def close(self, reason: str = "done") -> None:
        """Kill background jobs and stop the VM, tell extensions, stop MCP servers, record the end."""
        if self.closed:
            return
        self.closed = True
        _close_parts(self.dispatcher.session, reason, self.ctx.sandbox, self.host, self.gateway)


def choose_mode(config: Config, requested: Mode | str | None, *, door: str) -> ModeChoice:
    """The session's mode: ``requested`` bounded by the operator's ``policy.mode``.

    Every door calls this once, before anything is opened, and hands the
    choice on; a looser mode raises ``ModeRefused`` naming ``door``.
    """
    try:
        return resolve_mode(requested, config.policy, door=door,
                            config_file=config.source_of("policy.mode"))
    except ModeRefused:
        layered = layers_of(config)
        mine = layered.origin("policy.mode")
        if layered.site is None or mine.kind == "site":
            raise
        # Under a site the ceiling here is the engineer's own narrowing, which they may
        # relax up to the site's: saying "the operator can allow it" would send them astray.
        raise ModeRefused(
            f"{door} {requested}: refused, it is looser than policy.mode "
            f"\"{config.policy.mode}\" in your own {mine.where}. Choose the same or a stricter "
            f"mode, or change policy.mode there (the site allows up to "
            f"\"{layered.site.settings.policy.mode}\", {layered.site.settings_file}).") from None


def allowed_modes(config: Config) -> tuple[Mode, ...]:
    """The modes a door may offer a person: those :func:`choose_mode` would take, strictest first.

    A door that lists modes (the editor's mode menu over ACP) offers exactly
    these, so a mode the site or the engineer's own settings forbid is never shown.
    """
    out: list[Mode] = []
    for mode in MODES:  # strictest first
        try:
            choose_mode(config, mode, door="")
        except ModeRefused:
            continue
        out.append(mode)
    return tuple(out)


def artifact_store(config: Config, session: Session) -> ArtifactStore:
    """Where ``session`` keeps cut outputs and preimages, redacted as its events are."""
    store = session.store
    # only where a rule can exist: configured, learned from an extension now, or learned
    # in an earlier process of this session (remembered, docs/event-log.md)
    redact = (store.redactor.text if store.settings.redact or config.extensions or store.redactor
              else None)
    return ArtifactStore.beside(store.path, session.id, redact=redact)


def _spec(spec: ExtensionSpec | McpServerSpec) -> dict[str, Any]:
    # env values may be credentials: the names say what was set, the values stay out.
    data = spec.model_dump(mode="json")
    if isinstance(data.get("env"), dict):
        data["env"] = sorted(data["env"])
    return data


def decision_basis(session_id: str, policy: PolicySettings, extensions: Sequence[ExtensionSpec],
                   mcp_servers: Sequence[McpServerSpec], tools: Mapping[str, Any]) -> DecisionBasis:
    offered: dict[str, Any] = {}
    for name in sorted(tools):
        try:
            offered[name] = tools[name].spec()
        except (AttributeError, TypeError, ValueError):
            offered[name] = None
    copy: dict[str, Any] = {
        "policy": policy.model_dump(mode="json"),
        "extensions": [_spec(e) for e in extensions],
        "mcp_pins": {m.name: m.tools_sha256 for m in mcp_servers},
        "tools": offered,
    }
    text = json.dumps(copy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return DecisionBasis(session_id=session_id, digest=digest, **copy)


def record_basis(session: Session, basis: DecisionBasis) -> None:
    """Append ``basis`` unless the session's latest recorded basis is the same one."""
    latest = ""
    for stored in session.store.events(session.id, types=("decision_basis",)):
        latest = getattr(stored.event, "digest", "")
    if latest != basis.digest:
        session.append(basis)


def _offer(tools: dict[str, Tool], new: dict[str, Any], where: str) -> None:
    """Add ``new`` to ``tools``; a name offered twice is refused, naming both sources."""
    for name, tool in new.items():
        if name in tools:
            raise ConfigError(
                f"two tools are named {name!r}: one from {tools[name].source}, one from "
                f"{tool.source} ({where}). Rename one or remove one from the config; Abhed will "
                "not pick one by load order.")
        tools[name] = tool


def open_tooling(config: Config, session: Session, workspace: Workspace, *, mode: ModeChoice,
                 approver: Approver | None = None, run_id: str = "", sandbox: bool = True,
                 ledger: FileLedger | None = None, subagents: Any = None) -> Tooling:
    """Build tools, sandbox, extensions, MCP servers and policy for ``session``.

    Args:
        mode: the session's mode, from :func:`choose_mode` (resolved once, by the door).
        approver: who answers "ask"; ``None`` or a ``HeadlessApprover`` means
            nobody, so ask means deny.
        run_id: recorded in approval events (the loop sets it per run itself).
        sandbox: open the shell sandbox (a microVM boots lazily on the first
            command, so this is cheap); ``False`` leaves bash refusing.
        ledger: what the tools ask about files seen (default: the session's
            own; an agent with subagents passes its view of the shared tree).
        subagents: who runs ``task`` calls (``None``: task refuses).

    Raises:
        ConfigError: a tool name is offered twice (extension / MCP / native).
    """
    tools: dict[str, Tool] = dict(native_tools())
    notices: list[Notice] = []
    if layers_of(config).site is None:
        notices.append(Notice("no_site_settings", "site", NO_SITE, "note"))

    def notice(kind: _Recorded, subject: str, message: str) -> None:
        notices.append(Notice(kind, subject, message))
        session.append(StartupNotice(session_id=session.id, kind=kind, subject=subject,
                                     message=message))

    box: ShellSandbox | None = None
    problem: str | None = None
    host: ExtensionHost | None = None
    gateway: McpGateway | None = None
    try:
        if sandbox:
            try:
                box = open_sandbox(workspace.root, config.sandbox,
                                   on_fallback=lambda why: notice("sandbox_fallback", "microvm", why))
            except SandboxError as exc:
                problem = str(exc)
                notice("sandbox_unavailable", config.sandbox.backend,
                       f"bash is unavailable this session: {exc}")
        if config.extensions:
            host = ExtensionHost(config.extensions, session_id=session.id, sink=session.append,
                                 redactor=session.store.redactor)
            host.session_start(workspace.root)
            _offer(tools, dict(host.list_tools(tools)), "extensions")
            for name, why in sorted(host.dead().items()):
                notice("extension_dead", name, f"extension {name!r} is dead and skipped for this "
                       f"session ({why}); its tools and checks are missing")
        if config.mcp_servers:
            gateway = McpGateway(config.mcp_servers)
            gateway.start()
            _offer(tools, dict(gateway.tools), "MCP servers")
            for name, why in sorted(gateway.refused.items()):
                notice("mcp_refused", name, why)
        settings = config.policy.model_copy(update={"mode": mode.mode})
        # A copy of what decides, named by digest in every policy_decision (docs/event-log.md).
        basis = decision_basis(session.id, settings, config.extensions, config.mcp_servers, tools)
        record_basis(session, basis)
    except BaseException:
        _close_parts(session, "startup failed", box, host, gateway)
        raise
    ctx = ToolContext(workspace=workspace, settings=config.tools,
                      ledger=ledger if ledger is not None else session, sandbox=box,
                      sandbox_problem=problem, artifacts=artifact_store(config, session),
                      subagents=subagents)
    gate = Gate(PolicyEngine(settings), hook=host, approver=approver, run_id=run_id,
                chosen_by=mode.chosen_by, operator=config.policy,
                config_file=config.source_of("policy.mode"),
                basis_digest=basis.digest)
    return Tooling(Dispatcher(session, tools, ctx, gate), tools, ctx, mode, config, host, gateway,
                   notices)
