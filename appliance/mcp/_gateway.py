"""The reviewed MCP gateway: stdio servers whose tool lists must match what an operator pinned.

At start the gateway launches each configured server (official ``mcp`` SDK,
stdio transport), fetches its tool list, reduces it to a canonical form
(names, descriptions, input/output schemas, annotations) and compares its
sha256 with ``tools_sha256`` from the config.  A server whose list differs is
refused, naming what changed when the reviewed copy is on file (tool-definition
poisoning, rug pulls); an unpinned server is refused until reviewed.

The SDK is asynchronous; the gateway runs it on one event loop in a
background thread (an anyio blocking portal) so the synchronous dispatch path
can call tools with a deadline.  ``mcp`` is imported only here, lazily.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self

from appliance._home import abhed_home
from appliance.mcp._errors import McpError
from appliance.mcp._settings import McpServerSpec
from appliance.mcp._tools import McpTool, make_mcp_tool
from foundation import FoundationError, parse_json_list, read_regular

__all__ = ["McpGateway", "canonical_tools", "describe_changes", "reviewed_path", "tools_sha256"]

_FIELDS = ("name", "description", "inputSchema", "outputSchema", "annotations")
_MAX_REVIEWED_BYTES = 16 << 20  # a reviewed tool list: far more than any server lists


def canonical_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The reviewed form of a tool list: the fields that steer the model or policy, sorted."""
    out = []
    for tool in tools:
        raw = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.append({k: raw[k] for k in _FIELDS if k in raw})
    return sorted(out, key=lambda t: str(t.get("name")))


def tools_sha256(canon: list[dict[str, Any]]) -> str:
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def reviewed_path(server: str, digest: str) -> Path:
    """Where ``abhed mcp review`` keeps the list it showed, so a later mismatch can be explained."""
    return abhed_home() / "mcp" / "reviewed" / f"{server}-{digest}.json"


def describe_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """Human sentences naming every added, removed or changed tool and field."""
    before = {t.get("name"): t for t in old}
    after = {t.get("name"): t for t in new}
    changes = [f"tool {n!r} was added" for n in sorted(after.keys() - before.keys(), key=str)]
    changes += [f"tool {n!r} was removed" for n in sorted(before.keys() - after.keys(), key=str)]
    for name in sorted(before.keys() & after.keys(), key=str):
        for field in _FIELDS[1:]:
            if before[name].get(field) != after[name].get(field):
                was = json.dumps(before[name].get(field), sort_keys=True)[:160]
                now = json.dumps(after[name].get(field), sort_keys=True)[:160]
                changes.append(f"tool {name!r}: {field} changed from {was} to {now}")
    return changes


class McpGateway:
    """Connected, verified MCP servers and their tools (``mcp__SERVER__TOOL``).

    Args:
        specs: the ``mcp_servers`` config section.
        verify: refuse servers whose list does not match the pin (``False``
            only for ``abhed mcp review``, which shows the list to pin).
    """

    def __init__(self, specs: Sequence[McpServerSpec], *, verify: bool = True) -> None:
        self.specs = list(specs)
        self.verify = verify
        self.tools: dict[str, McpTool] = {}
        self.refused: dict[str, str] = {}
        self.listed: dict[str, list[dict[str, Any]]] = {}
        self._clients: dict[str, Any] = {}
        self._stack = ExitStack()
        self._portal: Any = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        from anyio.from_thread import start_blocking_portal

        self._portal = self._stack.enter_context(start_blocking_portal())
        for spec in self.specs:
            try:
                self._start_one(spec)
            except McpError as exc:
                self.refused[spec.name] = str(exc)

    def _start_one(self, spec: McpServerSpec) -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        if self.verify and spec.tools_sha256 is None:
            raise McpError(f"MCP server {spec.name!r} has no tools_sha256: it has not been reviewed. "
                           f"Run `abhed mcp review {spec.name}`, read the list, and pin its hash.")
        errlog = self._stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
        params = StdioServerParameters(command=spec.command, args=spec.args, env=spec.env or None,
                                       cwd=spec.cwd)
        timeout = spec.timeout_ms / 1000
        client = Client(stdio_client(params, errlog=errlog), read_timeout_seconds=timeout,
                        cache=None, mode="legacy")
        try:
            cm = self._portal.wrap_async_context_manager(client)
            cm.__enter__()  # the handshake is bounded by read_timeout_seconds
            self._stack.callback(_quiet_exit, cm)
            tools: list[Any] = []
            cursor = None
            for _ in range(100):
                page = self._portal.call(_with_timeout, lambda c=cursor: client.list_tools(cursor=c),
                                         timeout)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except McpError:
            raise
        except Exception as exc:
            errlog.seek(0)
            tail = errlog.read()[-300:].strip()
            raise McpError(f"MCP server {spec.name!r} ({spec.command}) could not be started or "
                           f"listed: {type(exc).__name__}: {str(exc)[:200]}"
                           + (f"; its error output: {tail!r}" if tail else "")) from None
        canon = canonical_tools(tools)
        digest = tools_sha256(canon)
        self.listed[spec.name] = canon
        if self.verify and digest != spec.tools_sha256:
            raise McpError(self._mismatch(spec, canon, digest))
        self._clients[spec.name] = client
        for entry, tool in zip(canon, sorted(tools, key=lambda t: str(t.name))):
            made = make_mcp_tool(self, spec.name, entry, tool.name)
            self.tools[made.name] = made

    @staticmethod
    def _mismatch(spec: McpServerSpec, canon: list[dict[str, Any]], digest: str) -> str:
        head = (f"MCP server {spec.name!r} was refused: its tool list hashes to {digest}, not the "
                f"reviewed {spec.tools_sha256}. A changed list can carry new instructions to the "
                "model (tool-definition poisoning), so none of its tools are offered.")
        assert spec.tools_sha256 is not None
        saved = reviewed_path(spec.name, spec.tools_sha256)
        try:  # foundation's one reader: a damaged, oversized or doctored file is not on file
            old: list[Any] | None = parse_json_list(
                read_regular(saved, _MAX_REVIEWED_BYTES, "reviewed tool list"),
                what="reviewed tool list", source=saved)
        except FoundationError:
            old = None
        if isinstance(old, list) and tools_sha256(old) == spec.tools_sha256:
            changes = describe_changes(old, canon)
            head += " What changed: " + "; ".join(changes[:20]) + "."
        else:
            names = ", ".join(str(t.get("name")) for t in canon)
            head += f" (The reviewed list is not on file to compare; it now offers: {names}.)"
        return head + f" Review it again with `abhed mcp review {spec.name}` before pinning."

    def call(self, server: str, tool: str, args: dict[str, Any], timeout_s: float) -> Any:
        """Call one tool; returns the SDK's ``CallToolResult``; raises on transport failure."""
        client = self._clients[server]
        return self._portal.call(_with_timeout, lambda: client.call_tool(tool, args), timeout_s)

    def close(self) -> None:
        self._clients.clear()
        self._stack.close()


async def _with_timeout(fn: Any, timeout_s: float) -> Any:
    import anyio

    with anyio.fail_after(timeout_s):
        return await fn()


def _quiet_exit(cm: Any) -> None:
    try:
        cm.__exit__(None, None, None)
    except Exception:
        pass
