"""Wire a session, its tools, a provider and the loop together from config.

``abhed run``, ``abhed rpc`` and (later) the TUI all start an agent this way,
so they refuse the same bad configurations with the same words, before the
first request.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance._errors import ConfigError
from appliance._home import abhed_home
from appliance._runtime import open_tooling
from appliance.events import EventStore
from appliance.loop._agent import Agent
from appliance.loop._approver import Approver
from appliance.loop._observed import ObservedSession
from appliance.loop._prompt import SystemPrompt, build_system_prompt
from models import Catalog, OpenAIProvider, ProviderConfig, load_catalog, open_provider
from tools import Workspace

if TYPE_CHECKING:
    from appliance._config import Config

__all__ = ["choose_provider", "load_config_catalog", "start_agent"]


def load_config_catalog(config: Config) -> Catalog:
    path = Path(config.catalog).expanduser() if config.catalog else abhed_home() / "catalog.json"
    return load_catalog(path)


def choose_provider(config: Config, name: str | None) -> ProviderConfig:
    providers = {p.name: p for p in config.custom_providers}
    if not providers:
        raise ConfigError("no model provider is configured: add one to \"custom_providers\" in "
                          "config.json (see docs/providers.md), e.g. a local `abhed serve`")
    wanted = name or config.default_provider or config.custom_providers[0].name
    if wanted not in providers:
        raise ConfigError(f"no provider named {wanted!r}; configured: {', '.join(providers)}")
    return providers[wanted]


def start_agent(config: Config, store: EventStore, workspace: Path, *, provider_name: str | None = None,
                model: str | None = None, mode: str = "auto", approver: Approver | None = None,
                sampling: dict[str, Any] | None = None, session_id: str | None = None,
                first_tool_choice: str | dict[str, Any] | None = None,
                check_model: bool = True) -> tuple[Agent, OpenAIProvider]:
    """Refuse bad config, open (or resume) the session, and return a ready agent."""
    pconf = choose_provider(config, provider_name)
    catalog = load_config_catalog(config) if pconf.catalog_entry else None
    limits = config.loop
    if limits.context_tokens is None and catalog is not None and pconf.catalog_entry:
        # The context budget compaction works against: the served model's length.
        limits = limits.model_copy(update={"context_tokens":
                                           catalog.get(pconf.catalog_entry).max_model_len})
    provider = open_provider(pconf, catalog=catalog, model=model, sampling=sampling,
                             check_model=check_model)
    ws = Workspace(str(workspace), config.tools.secret_paths)
    if session_id:
        session = ObservedSession.open(store, session_id, ws.root)
    else:
        session = ObservedSession.create(store, ws.root, version=version("abhed"), settings={
            "tools": config.tools.model_dump(mode="json"), "provider": pconf.name,
            "model": provider.model, "mode": mode})
    assert isinstance(session, ObservedSession)
    # The same tools, policy gate, extensions and sandbox as every other door in.
    try:
        tooling = open_tooling(config, session, ws, mode=mode,  # type: ignore[arg-type]
                               approver=approver)
    except BaseException:
        provider.close()
        raise
    prompt = build_system_prompt(ws.root, tooling.tools)
    host = tooling.host
    if host is not None:
        # Extensions may add to the system prompt (read once: a stable prefix).
        prompt = SystemPrompt(host.system_prompt(prompt.text), prompt.instructions_file)
    agent = Agent(session=session, dispatcher=tooling.dispatcher, provider=provider,
                  system_prompt=prompt, tools=tooling.tools,
                  limits=limits, approver=approver, mode=mode,
                  first_tool_choice=first_tool_choice,
                  before_send=host.before_send if host is not None else None)
    agent.closers += [provider.close, lambda: tooling.close("session closed")]
    from appliance.tasks import Subagents

    t = config.tasks
    tooling.ctx.subagents = Subagents(agent, max_concurrent=t.max_concurrent,
                                      default_max_turns=t.default_max_turns,
                                      max_tokens=t.max_tokens, max_seconds=t.max_seconds)
    return agent, provider
