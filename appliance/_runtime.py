"""Everything one session's tool calls need, built from config in one place.

``abhed tool``, ``abhed run``, ``abhed rpc`` (and later the TUI) all get
their dispatcher here, so a session has the same tools, the same policy, the
same extensions and the same sandbox whichever door it came in by: an
operator's deny rule cannot be missed because one entry point forgot it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from appliance._dispatch import Dispatcher
from appliance._session import Session
from tools import Tool, ToolContext, Workspace, native_tools

if TYPE_CHECKING:
    from appliance._config import Config
    from appliance.extensions import ExtensionHost
    from appliance.loop._approver import Approver
    from appliance.mcp import McpGateway
    from appliance.policy import Mode

__all__ = ["Tooling", "open_tooling"]


@dataclass
class Tooling:
    """A session's dispatcher and what it holds open; :meth:`close` releases it all."""

    dispatcher: Dispatcher
    tools: dict[str, Tool]
    ctx: ToolContext
    host: ExtensionHost | None = None
    gateway: McpGateway | None = None
    closed: bool = field(default=False, init=False)

    def close(self, reason: str = "done") -> None:
        """Kill background jobs and stop the VM, tell extensions, stop MCP servers."""
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
                if self.gateway is not None:
                    self.gateway.close()


def open_tooling(config: Config, session: Session, workspace: Workspace, *,
                 mode: Mode | None = None, approver: Approver | None = None,
                 run_id: str = "", sandbox: bool = True) -> Tooling:
    """Build tools, sandbox, extensions, MCP servers and policy for ``session``.

    Args:
        mode: overrides ``policy.mode`` from config (``abhed run --mode``).
        approver: who answers "ask"; ``None`` means nobody, so ask means deny.
        sandbox: open the shell sandbox (a microVM boots lazily on the first
            command, so this is cheap); ``False`` leaves bash refusing.

    Raises the config's own errors (a duplicate provided tool, an MCP server
    whose tool list no longer matches its pin) before any call is made.
    """
    from appliance.policy import Gate, PolicyEngine

    tools: dict[str, Tool] = dict(native_tools())
    from appliance.sessions import ArtifactStore

    ctx = ToolContext(workspace=workspace, settings=config.tools, ledger=session,
                      artifacts=ArtifactStore.beside(
                          session.store.path, session.id,
                          # only where a rule can exist: configured, or learned from an extension
                          redact=session.store.redactor.text
                          if session.store.settings.redact or config.extensions else None))
    host: ExtensionHost | None = None
    gateway: McpGateway | None = None
    tooling = Tooling(Dispatcher(session, tools, ctx), tools, ctx)
    try:
        if sandbox:
            from appliance.sandbox import SandboxError, open_sandbox

            try:
                ctx.sandbox = open_sandbox(workspace.root, config.sandbox)
            except SandboxError as exc:
                ctx.sandbox_problem = str(exc)
        if config.extensions:
            from appliance.extensions import ExtensionHost

            host = ExtensionHost(config.extensions, session_id=session.id, sink=session.append,
                                 redactor=session.store.redactor)
            tooling.host = host
            host.session_start(workspace.root)
            tools.update(host.list_tools(tools))
        if config.mcp_servers:
            from appliance.mcp import McpGateway

            gateway = McpGateway(config.mcp_servers)
            tooling.gateway = gateway
            gateway.start()
            tools.update(gateway.tools)  # refused servers are in gateway.refused
        settings = config.policy if mode is None else config.policy.model_copy(update={"mode": mode})
        gate = Gate(PolicyEngine(settings), hook=host, approver=approver, run_id=run_id)
        # A copy of what decides, named by digest in every policy_decision (docs/event-log.md).
        from appliance._basis import decision_basis, record_basis

        basis = decision_basis(session.id, settings, config.extensions, config.mcp_servers, tools)
        record_basis(session, basis)
        gate.basis_digest = basis.digest
        tooling.dispatcher = Dispatcher(session, tools, ctx, policy=gate)
    except BaseException:
        tooling.close("startup failed")
        raise
    return tooling
