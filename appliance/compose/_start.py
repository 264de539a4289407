"""A whole agent, and each of its subagents, built from config in one place.

``abhed run``, ``abhed rpc`` and the TUI call :func:`start_agent`; the agent's
``task`` calls build their children through :class:`Children`, here, so a
child has what its parent has: the extensions' system prompt and message
hooks, the compaction settings of the served model, the session's artifact
redaction, and the parent's policy narrowed to the child's tools.  Only its
budget differs: what the parent reserved for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from appliance._dispatch import Dispatcher
from appliance._errors import ConfigError
from appliance._home import abhed_home
from appliance._session import Session
from appliance.assembly import (
    ABSENT,
    Config,
    Notice,
    Tooling,
    artifact_store,
    choose_mode,
    layers_of,
    open_tooling,
)
from appliance.compose._local_model import open_reached
from appliance.events import EventStore
from appliance.loop import Agent, Budget, Limits, SystemPrompt, build_system_prompt
from appliance.policy import Approver, Gate, Mode, ModeChoice
from appliance.sandbox import shell_for
from appliance.tasks import SubagentSpawner
from models import (
    Catalog,
    OpenAIProvider,
    ProviderConfig,
    ProviderConfigError,
    load_catalog,
    signature_identity,
)
from tools import FileLedger, Tool, ToolContext, Workspace

__all__ = ["Children", "StartedAgent", "choose_provider", "load_config_catalog", "start_agent"]


def load_config_catalog(config: Config) -> Catalog:
    """The model catalog config points at (default: ``ABHED_HOME/catalog.json``)."""
    path = Path(config.catalog).expanduser() if config.catalog else abhed_home() / "catalog.json"
    return load_catalog(path)


def choose_provider(config: Config, name: str | None) -> ProviderConfig:
    """The provider named, else ``default_provider``, else the first configured."""
    providers = {p.name: p for p in config.custom_providers}
    if not providers:
        # The file by its path: ABHED_HOME (or --config) decides which config.json it is.
        where = layers_of(config).user_file
        if where.endswith(ABSENT):
            where = where.removesuffix(ABSENT) + " (it does not exist yet: create it)"
        raise ConfigError(f"no model provider is configured: add one to \"custom_providers\" in "
                          f"{where} (see docs/providers.md), e.g. a local `abhed serve`")
    wanted = name or config.default_provider or config.custom_providers[0].name
    if wanted not in providers:
        raise ConfigError(f"no provider named {wanted!r}; configured: {', '.join(providers)}")
    return providers[wanted]


def _limits(config: Config, pconf: ProviderConfig, catalog: Catalog | None) -> Limits:
    """The loop's limits; the context budget compaction works against is the served model's length."""
    limits = config.loop
    if limits.context_tokens is None and catalog is not None and pconf.catalog_entry:
        limits = limits.model_copy(update={"context_tokens":
                                           catalog.get(pconf.catalog_entry).max_model_len})
    return limits


class Children:
    """How a session's subagents are built (implements ``appliance.tasks.ChildAssembly``).

    Everything a child shares with its parent comes from the parent's
    tooling: the config, the extension host (its system prompt addition,
    its ``before_send``, its call and result hooks through the gate), the
    sandbox, the approver and the policy (narrowed to the child's tools by
    :meth:`PolicyEngine.attenuated`, the one way a narrower policy is made).
    """

    def __init__(self, tooling: Tooling, provider: OpenAIProvider, limits: Limits, *,
                 first_tool_choice: str | dict[str, Any] | None = None) -> None:
        self.tooling = tooling
        self.provider = provider
        self.limits = limits
        self.first_tool_choice = first_tool_choice

    def open_session(self, parent: Session, call_id: str, settings: dict[str, object],
                     session_id: str) -> Session:
        """A new session in the parent's log, linked to the ``task`` call that made it."""
        child = Session.create(parent.store, parent.workspace, version=version("abhed"),
                               parent=(parent.id, call_id),
                               settings={**settings, **layers_of(self.tooling.config).record()},
                               session_id=session_id)
        parent.adopt(child)  # rpc and --json stream the child's events too
        return child

    def _gate(self, tools: dict[str, Tool]) -> Gate:
        gate = self.tooling.gate
        caps: set[str] = set().union(*(t.capabilities for t in tools.values())) if tools else set()
        # The parent's basis: the child's narrowing is in its tools, recorded in its requests.
        return Gate(gate.engine.attenuated(caps), hook=gate.hook, approver=gate.approver,
                    run_id=gate.run_id, chosen_by=gate.chosen_by, operator=gate.operator,
                    config_file=gate.config_file, basis_digest=gate.basis_digest)

    def build(self, session: Session, tools: dict[str, Tool], profile_prompt: str,
              ledger: FileLedger, reserved: Budget) -> Agent:
        """The child's agent: its tools and profile, the parent's everything else, its reserved budget."""
        parent = self.tooling
        ctx = ToolContext(workspace=parent.ctx.workspace, settings=parent.config.tools, ledger=ledger,
                          # Its own shell in the session's sandbox: a `cd` here moves no one else.
                          sandbox=shell_for(parent.ctx.sandbox, session.id) if "bash" in tools else None,
                          sandbox_problem=parent.ctx.sandbox_problem,
                          artifacts=artifact_store(parent.config, session))
        base = build_system_prompt(parent.ctx.workspace.root, tools)
        prompt = _prompt(parent, base.text + "\n" + profile_prompt + "\n", base.instructions_file)
        limits = self.limits.model_copy(update={
            "max_turns": reserved.turns, "max_tokens": reserved.tokens,
            "deadline_s": max(0.001, reserved.left_seconds())})
        host = parent.host
        return Agent(session=session, dispatcher=Dispatcher(session, tools, ctx, self._gate(tools)),
                     provider=self.provider, system_prompt=prompt, tools=tools, limits=limits,
                     first_tool_choice=self.first_tool_choice,
                     before_send=host.before_send if host is not None else None)


def _prompt(tooling: Tooling, text: str, instructions_file: str | None) -> SystemPrompt:
    """The system prompt with the extensions' addition (asked once per agent: a stable prefix)."""
    host = tooling.host
    return SystemPrompt(host.system_prompt(text) if host is not None else text, instructions_file)


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

    @property
    def context_tokens(self) -> int | None:
        """The context length compaction works against (config, else the catalog; None: unknown)."""
        return self.agent.limits.context_tokens


def start_agent(config: Config, store: EventStore, workspace: Path, *, door: str,
                provider_name: str | None = None, model: str | None = None,
                mode: Mode | str | None = None, approver: Approver | None = None,
                sampling: dict[str, Any] | None = None, session_id: str | None = None,
                first_tool_choice: str | dict[str, Any] | None = None,
                child_first_tool_choice: str | dict[str, Any] | None = None,
                check_model: bool = True, sandbox: bool = True,
                say: Callable[[str], None] | None = None) -> StartedAgent:
    """Refuse bad config, open (or resume) the session, and return a ready agent.

    ``door`` and ``mode`` are as for :func:`appliance.compose.choose_mode`; a
    refused mode is refused before the provider is opened or a session
    created.  ``child_first_tool_choice`` forces the first turn of each
    subagent (a tiny test model that must call a tool); ``sandbox`` False
    leaves bash refusing.  ``say`` hears what the door should tell its user while it
    waits (a local model service being started on demand, and its log).
    """
    choice = choose_mode(config, mode, door=door)
    pconf = choose_provider(config, provider_name)
    catalog = load_config_catalog(config) if pconf.catalog_entry else None
    limits = _limits(config, pconf, catalog)
    pconf, provider, closer = open_reached(config, pconf, say=say, catalog=catalog, model=model,
                                           sampling=sampling, check_model=check_model)
    try:
        ws = Workspace(str(workspace), config.tools.secret_paths)
        if session_id:
            session = Session.open(store, session_id, ws.root)
        else:
            session = Session.create(store, ws.root, version=version("abhed"), settings={
                "tools": config.tools.model_dump(mode="json"), "provider": pconf.name,
                "model": provider.model, "mode": choice.mode, "mode_chosen_by": choice.chosen_by,
                "door": door, "model_signature": model_signature(catalog, pconf.catalog_entry),
                **layers_of(config).record()})
        t = config.tasks
        subagents = SubagentSpawner(max_concurrent=t.max_concurrent, default_max_turns=t.default_max_turns,
                              max_tokens=t.max_tokens, max_seconds=t.max_seconds)
        tooling = open_tooling(config, session, ws, mode=choice, approver=approver, sandbox=sandbox,
                               ledger=subagents.parent_ledger(session), subagents=subagents)
    except BaseException:
        closer()
        raise
    base = build_system_prompt(ws.root, tooling.tools)
    agent = Agent(session=session, dispatcher=tooling.dispatcher, provider=provider,
                  system_prompt=_prompt(tooling, base.text, base.instructions_file),
                  tools=tooling.tools, limits=limits, first_tool_choice=first_tool_choice,
                  before_send=tooling.host.before_send if tooling.host is not None else None)
    agent.closers += [closer, lambda: tooling.close("session closed")]
    subagents.bind(agent, Children(tooling, provider, limits,
                                   first_tool_choice=child_first_tool_choice))
    return StartedAgent(agent, provider, tooling)


def model_signature(catalog: Catalog | None, entry: str | None) -> dict[str, str] | str:
    """The served model's OpenSSF signature identity, for the session's start record.

    Read from the weights directory the catalog names (``model.sig`` and its key;
    docs/bundle.md): which key signed which files.  "none" when the provider names
    no catalog entry or the model is unsigned; the check itself is ``abhed serve``'s.
    """
    if catalog is None or entry is None:
        return "none"
    try:
        return signature_identity(catalog.get(entry).weights_path(catalog.base())) or "none"
    except ProviderConfigError:
        return "none"
