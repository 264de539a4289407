"""Everything one session needs, built from config in one place: tools, policy, agent.

``abhed tool``, ``abhed run``, ``abhed rpc``, the TUI and subagents all come
through here, so a session has the same tools, the same policy, the same
extensions and the same sandbox whichever door it came in by: an operator's
deny rule or ``policy.mode`` cannot be missed because one entry point forgot it.

What set-up refuses or degrades (an MCP server withheld because its tools no
longer match their pin, an extension dead at start, the sandbox falling back
from microVM to bubblewrap or missing) is recorded as a ``startup_notice``
event and returned in :attr:`Tooling.notices`, for the door to say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from appliance._dispatch import Dispatcher
from appliance._errors import ConfigError
from appliance._home import abhed_home
from appliance._session import Session
from appliance.events import EventStore, SessionEnded, StartupNotice
from tools import Tool, ToolContext, Workspace, native_tools

if TYPE_CHECKING:
    from appliance._config import Config
    from appliance.extensions import ExtensionHost
    from appliance.loop import Agent
    from appliance.mcp import McpGateway
    from appliance.policy import Approver, Mode, ModeChoice
    from models import Catalog, OpenAIProvider, ProviderConfig

__all__ = [
    "Notice",
    "StartedAgent",
    "Tooling",
    "choose_provider",
    "load_config_catalog",
    "open_tooling",
    "start_agent",
]

NoticeKind = Literal["mcp_refused", "extension_dead", "sandbox_fallback", "sandbox_unavailable"]


@dataclass(frozen=True)
class Notice:
    """One thing set-up refused or degraded, as every door says it."""

    kind: NoticeKind
    subject: str
    message: str

    def line(self) -> str:
        """The one-line warning a CLI door prints on stderr."""
        return f"warning: {self.message}"


@dataclass
class Tooling:
    """A session's dispatcher and what it holds open; :meth:`close` releases it all."""

    dispatcher: Dispatcher
    tools: dict[str, Tool]
    ctx: ToolContext
    mode: ModeChoice
    host: ExtensionHost | None = None
    gateway: McpGateway | None = None
    notices: list[Notice] = field(default_factory=list)
    closed: bool = field(default=False, init=False)

    def close(self, reason: str = "done") -> None:
        """Kill background jobs and stop the VM, tell extensions, stop MCP servers, record the end."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.ctx.sandbox is not None:
                self.ctx.sandbox.close()
        finally:
            try:
                if self.host is not None:
                    self.host.close(reason)  # sends session_end first
            finally:
                try:
                    if self.gateway is not None:
                        self.gateway.close()
                finally:
                    session = self.dispatcher.session
                    session.append(SessionEnded(session_id=session.id, reason=reason))


def _offer(tools: dict[str, Tool], new: dict[str, Tool], where: str) -> None:
    """Add ``new`` to ``tools``; a name offered twice is refused, naming both sources."""
    for name, tool in new.items():
        if name in tools:
            raise ConfigError(
                f"two tools are named {name!r}: one from {tools[name].source}, one from "
                f"{tool.source} ({where}). Rename one or remove one from the config; Abhed will "
                "not pick one by load order.")
        tools[name] = tool


def open_tooling(config: Config, session: Session, workspace: Workspace, *,
                 door: str, mode: Mode | str | None = None, approver: Approver | None = None,
                 run_id: str = "", sandbox: bool = True) -> Tooling:
    """Build tools, sandbox, extensions, MCP servers and policy for ``session``.

    Args:
        door: where the request came from (``"abhed run --mode"``), named in
            a refusal and recorded with the mode.
        mode: the caller's requested mode; ``None`` takes ``policy.mode``.
            Bounded by :func:`appliance.policy.resolve_mode`.
        approver: who answers "ask"; ``None`` or a ``HeadlessApprover`` means
            nobody, so ask means deny.
        run_id: recorded in approval events (the loop sets it per run itself).
        sandbox: open the shell sandbox (a microVM boots lazily on the first
            command, so this is cheap); ``False`` leaves bash refusing.

    Raises:
        ModeRefused: ``mode`` is looser than the operator allows.
        ConfigError: a tool name is offered twice (extension / MCP / native).
    """
    from appliance.policy import Gate, PolicyEngine, resolve_mode

    choice = resolve_mode(mode, config.policy, door=door, config_file=config.source)
    settings = config.policy.model_copy(update={"mode": choice.mode})
    tools: dict[str, Tool] = dict(native_tools())
    from appliance.sessions import ArtifactStore

    ctx = ToolContext(workspace=workspace, settings=config.tools, ledger=session,
                      artifacts=ArtifactStore.beside(
                          session.store.path, session.id,
                          # only where a rule can exist: configured, or learned from an extension
                          redact=session.store.redactor.text
                          if session.store.settings.redact or config.extensions else None))
    gate = Gate(PolicyEngine(settings), approver=approver, run_id=run_id,
                chosen_by=choice.chosen_by, operator=config.policy, config_file=config.source)
    tooling = Tooling(Dispatcher(session, tools, ctx, gate), tools, ctx, choice)

    def notice(kind: NoticeKind, subject: str, message: str) -> None:
        tooling.notices.append(Notice(kind, subject, message))
        session.append(StartupNotice(session_id=session.id, kind=kind, subject=subject,
                                     message=message))

    try:
        if sandbox:
            from appliance.sandbox import SandboxError, open_sandbox

            try:
                ctx.sandbox = open_sandbox(
                    workspace.root, config.sandbox,
                    on_fallback=lambda why: notice("sandbox_fallback", "microvm", why))
            except SandboxError as exc:
                ctx.sandbox_problem = str(exc)
                notice("sandbox_unavailable", config.sandbox.backend,
                       f"bash is unavailable this session: {exc}")
        if config.extensions:
            from appliance.extensions import ExtensionHost

            host = ExtensionHost(config.extensions, session_id=session.id, sink=session.append,
                                 redactor=session.store.redactor)
            tooling.host = gate.hook = host
            host.session_start(workspace.root)
            _offer(tools, dict(host.list_tools(tools)), "extensions")
            for name, why in sorted(host.dead().items()):
                notice("extension_dead", name, f"extension {name!r} is dead and skipped for this "
                       f"session ({why}); its tools and checks are missing")
        if config.mcp_servers:
            from appliance.mcp import McpGateway

            gateway = McpGateway(config.mcp_servers)
            tooling.gateway = gateway
            gateway.start()
            _offer(tools, dict(gateway.tools), "MCP servers")
            for name, why in sorted(gateway.refused.items()):
                notice("mcp_refused", name, why)
        # A copy of what decides, named by digest in every policy_decision (docs/event-log.md).
        from appliance._basis import decision_basis, record_basis

        basis = decision_basis(session.id, settings, config.extensions, config.mcp_servers, tools)
        record_basis(session, basis)
        gate.basis_digest = basis.digest
    except BaseException:
        tooling.close("startup failed")
        raise
    return tooling


def load_config_catalog(config: Config) -> Catalog:
    """The model catalog config points at (default: ``ABHED_HOME/catalog.json``)."""
    from models import load_catalog

    path = Path(config.catalog).expanduser() if config.catalog else abhed_home() / "catalog.json"
    return load_catalog(path)


def choose_provider(config: Config, name: str | None) -> ProviderConfig:
    """The provider named, else ``default_provider``, else the first configured."""
    providers = {p.name: p for p in config.custom_providers}
    if not providers:
        raise ConfigError("no model provider is configured: add one to \"custom_providers\" in "
                          "config.json (see docs/providers.md), e.g. a local `abhed serve`")
    wanted = name or config.default_provider or config.custom_providers[0].name
    if wanted not in providers:
        raise ConfigError(f"no provider named {wanted!r}; configured: {', '.join(providers)}")
    return providers[wanted]


@dataclass
class StartedAgent:
    """What :func:`start_agent` returns: the agent, its provider and its tooling."""

    agent: Agent
    provider: OpenAIProvider
    tooling: Tooling

    @property
    def notices(self) -> list[Notice]:
        return self.tooling.notices

    @property
    def mode(self) -> ModeChoice:
        return self.tooling.mode


def start_agent(config: Config, store: EventStore, workspace: Path, *, door: str,
                provider_name: str | None = None, model: str | None = None,
                mode: Mode | str | None = None, approver: Approver | None = None,
                sampling: dict[str, Any] | None = None, session_id: str | None = None,
                first_tool_choice: str | dict[str, Any] | None = None,
                check_model: bool = True) -> StartedAgent:
    """Refuse bad config, open (or resume) the session, and return a ready agent.

    ``door`` and ``mode`` are as for :func:`open_tooling`; a refused mode is
    refused before the provider is opened or a session created.
    """
    from appliance.loop import Agent, ObservedSession, SystemPrompt, build_system_prompt
    from appliance.policy import resolve_mode
    from models import open_provider

    choice = resolve_mode(mode, config.policy, door=door, config_file=config.source)
    pconf = choose_provider(config, provider_name)
    catalog = load_config_catalog(config) if pconf.catalog_entry else None
    limits = config.loop
    if limits.context_tokens is None and catalog is not None and pconf.catalog_entry:
        # The context budget compaction works against: the served model's length.
        limits = limits.model_copy(update={"context_tokens":
                                           catalog.get(pconf.catalog_entry).max_model_len})
    provider = open_provider(pconf, catalog=catalog, model=model, sampling=sampling,
                             check_model=check_model)
    try:
        ws = Workspace(str(workspace), config.tools.secret_paths)
        if session_id:
            session = ObservedSession.open(store, session_id, ws.root)
        else:
            session = ObservedSession.create(store, ws.root, version=version("abhed"), settings={
                "tools": config.tools.model_dump(mode="json"), "provider": pconf.name,
                "model": provider.model, "mode": choice.mode, "mode_chosen_by": choice.chosen_by,
                "door": door})
        assert isinstance(session, ObservedSession)
        tooling = open_tooling(config, session, ws, door=door, mode=mode, approver=approver)
    except BaseException:
        provider.close()
        raise
    prompt = build_system_prompt(ws.root, tooling.tools)
    host = tooling.host
    if host is not None:
        # Extensions may add to the system prompt (read once: a stable prefix).
        prompt = SystemPrompt(host.system_prompt(prompt.text), prompt.instructions_file)
    agent = Agent(session=session, dispatcher=tooling.dispatcher, provider=provider,
                  system_prompt=prompt, tools=tooling.tools, limits=limits,
                  first_tool_choice=first_tool_choice,
                  before_send=host.before_send if host is not None else None)
    agent.closers += [provider.close, lambda: tooling.close("session closed")]
    from appliance.tasks import Subagents

    t = config.tasks
    tooling.ctx.subagents = Subagents(agent, max_concurrent=t.max_concurrent,
                                      default_max_turns=t.default_max_turns,
                                      max_tokens=t.max_tokens, max_seconds=t.max_seconds)
    return StartedAgent(agent, provider, tooling)
