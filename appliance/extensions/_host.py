"""The extension host: send each event to the extensions that subscribed, combine their replies.

Combination is toward the stricter answer and independent of load order:
extensions are always consulted in *name* order (names are unique), block
beats ask beats silence, and each rewrite (arguments, result, messages,
system prompt) is applied in that same name order, each extension seeing the
previous one's output, so the same set of extensions gives the same outcome
however the config lists them.  Nothing an extension says can allow a call
(see ``_protocol``).  A dead extension is skipped for the rest of the session
and the log says which one died and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from appliance.events import Event, ExtensionDied, ExtensionLog, Redactor
from appliance.extensions._errors import DuplicateTool
from appliance.extensions._process import ExtensionProcess
from appliance.extensions._protocol import Nonsense, Reply, read_reply
from appliance.extensions._settings import ExtensionSpec
from appliance.extensions._tools import ProvidedTool, make_provided_tool
from appliance.policy import HookVerdict
from tools import ToolResult, failure

__all__ = ["ExtensionHost"]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DROPPABLE_ROLES = ("user", "assistant")


class ExtensionHost:
    """Runs the configured extensions for one session.

    Args:
        specs: the ``extensions`` config section.
        session_id: put in every request and recorded event.
        sink: where extension events (logs, deaths) are recorded, normally
            ``Session.append``; without one they collect in :attr:`events`.
        redactor: learns what a result rewrite took out, so the store
            redacts it from every field and later event (the event log's
            redactor, normally); without one a private one covers the result.
    """

    def __init__(self, specs: Sequence[ExtensionSpec], *, session_id: str = "",
                 sink: Callable[[Event], object] | None = None,
                 redactor: Redactor | None = None) -> None:
        self.session_id = session_id
        self.sink = sink
        self.redactor = redactor if redactor is not None else Redactor()
        self.events: list[Event] = []
        self._procs = [ExtensionProcess(s) for s in sorted(specs, key=lambda s: s.name)]
        self._reported: set[str] = set()
        self._provided: dict[str, tuple[ExtensionProcess, ProvidedTool]] = {}
        for proc in self._procs:
            if proc.dead:
                self._report_death(proc, "startup")

    @property
    def names(self) -> list[str]:
        return [p.name for p in self._procs]

    def dead(self) -> dict[str, str]:
        """Extension name -> why it died, for every dead one."""
        return {p.name: p.dead for p in self._procs if p.dead is not None}

    # -- plumbing ------------------------------------------------------------
    def _record(self, event: Event) -> None:
        self.events.append(event)
        if self.sink is not None:
            self.sink(event)

    def _report_death(self, proc: ExtensionProcess, event: str) -> None:
        if proc.dead is not None and proc.name not in self._reported:
            self._reported.add(proc.name)
            self._record(ExtensionDied(session_id=self.session_id, extension=proc.name,
                                       event=event, reason=proc.dead))

    def _subscribed(self, event: str) -> list[ExtensionProcess]:
        return [p for p in self._procs
                if p.dead is None and (not p.spec.events or event in p.spec.events)]

    def _ask(self, proc: ExtensionProcess, event: str, payload: dict[str, Any]) -> Reply:
        raw = proc.request({"event": event, "session_id": self.session_id, **payload})
        if raw is None:
            self._report_death(proc, event)
            return Reply()
        try:
            reply = read_reply(event, raw)
        except Nonsense as exc:
            proc.kill(f"replied nonsense to {event}: {exc}")
            self._report_death(proc, event)
            return Reply()
        if reply.ignored:
            self._record(ExtensionLog(
                session_id=self.session_id, extension=proc.name, event=event, kind="ignored",
                message=f"ignored reply fields {', '.join(reply.ignored)}: {event} honours only "
                f"the documented fields, and no reply can allow anything"))
        if reply.log:
            self._record(ExtensionLog(session_id=self.session_id, extension=proc.name, event=event,
                                      kind="log", message=reply.log[:4000]))
        return reply

    def _broadcast(self, event: str, payload: dict[str, Any]) -> None:
        for proc in self._subscribed(event):
            self._ask(proc, event, payload)

    # -- events ----------------------------------------------------------------
    def session_start(self, workspace: str) -> None:
        self._broadcast("session_start", {"workspace": workspace})

    def session_end(self, reason: str = "done") -> None:
        self._broadcast("session_end", {"reason": reason})

    def tool_call(self, call_id: str, tool: str, args: dict[str, Any]) -> HookVerdict:
        """Every subscribed extension judges the call; the strictest word wins."""
        block = ask = False
        by: list[str] = []
        reasons: list[str] = []
        rewritten_by: list[str] = []
        current = dict(args)
        for proc in self._subscribed("tool_call"):
            reply = self._ask(proc, "tool_call", {"call_id": call_id, "tool": tool, "args": current})
            if reply.block or reply.ask:
                block |= reply.block
                ask |= reply.ask
                by.append(proc.name)
                word = "blocked" if reply.block else "asked"
                reasons.append(f"extension {proc.name} {word}: {reply.reason or 'no reason given'}")
            if reply.args is not None and reply.args != current:
                current = reply.args
                rewritten_by.append(proc.name)
        return HookVerdict(block=block, ask=ask and not block, by=tuple(by), reasons=tuple(reasons),
                           args=current if rewritten_by else None, rewritten_by=tuple(rewritten_by))

    def tool_result(self, call_id: str, tool: str, args: dict[str, Any],
                    result: ToolResult) -> ToolResult:
        """Extensions may rewrite the content the model reads, or withhold it."""
        for proc in self._subscribed("tool_result"):
            reply = self._ask(proc, "tool_result", {
                "call_id": call_id, "tool": tool, "args": args, "ok": result.ok,
                "content": result.content,
                "error": result.error.code if result.error is not None else None})
            if reply.block:
                return failure("withheld_by_extension",
                               f"The result of this {tool} call was withheld by extension "
                               f"{proc.name}: {reply.reason or 'no reason given'}. The call did run; "
                               "do not repeat it just to see the output.")
            if reply.content is not None and reply.content != result.content:
                # A redacting rewrite of content must reach details (an edit's diff) and
                # error text too: learn what it took out and take it out everywhere.
                self.redactor.learn(result.content, reply.content, session=self.session_id)
                rewritten = result.model_copy(update={"content": reply.content})
                result = ToolResult.model_validate(
                    self.redactor.value(rewritten.model_dump(mode="json")))
        return result

    def before_send(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages about to go to the model, less any the extensions drop."""
        dropped: set[int] = set()
        for proc in self._subscribed("before_send"):
            view = [{"index": i, "role": m.get("role"), "content": m.get("content")}
                    for i, m in enumerate(messages) if i not in dropped]
            reply = self._ask(proc, "before_send", {"messages": view})
            refused = [i for i in reply.drop if not (0 <= i < len(messages))
                       or messages[i].get("role") not in _DROPPABLE_ROLES
                       or messages[i].get("tool_calls")]
            if refused:
                self._record(ExtensionLog(
                    session_id=self.session_id, extension=proc.name, event="before_send",
                    kind="ignored", message=f"not dropped: {refused} (only user messages and "
                    "assistant messages without tool calls can be dropped)"))
            dropped.update(i for i in reply.drop if i not in refused)
        return [m for i, m in enumerate(messages) if i not in dropped]

    def system_prompt(self, prompt: str) -> str:
        """The system prompt with every extension's addition appended, in name order."""
        for proc in self._subscribed("system_prompt"):
            reply = self._ask(proc, "system_prompt", {"prompt": prompt})
            if reply.append:
                prompt = prompt.rstrip("\n") + "\n\n" + reply.append
        return prompt

    # -- provided tools --------------------------------------------------------
    def list_tools(self, taken: Iterable[str] = ()) -> dict[str, ProvidedTool]:
        """Ask once (at startup) which tools the extensions provide.

        Raises :class:`DuplicateTool` naming both sources when a name is taken
        by a built-in (``taken``) or by another extension.
        """
        owners: dict[str, str] = {n: "a built-in tool" for n in taken}
        found: dict[str, ProvidedTool] = {}
        for proc in self._subscribed("list_tools"):
            reply = self._ask(proc, "list_tools", {})
            for spec in reply.tools:
                name = spec.get("name")
                if not isinstance(name, str) or not _TOOL_NAME.match(name):
                    self._record(ExtensionLog(
                        session_id=self.session_id, extension=proc.name, event="list_tools",
                        kind="ignored", message=f"tool with invalid name {str(name)[:80]!r} "
                        "skipped (names are 1-64 of A-Z a-z 0-9 _ -)"))
                    continue
                if name in owners:
                    raise DuplicateTool(
                        f"extension {proc.name!r} provides a tool named {name!r}, but "
                        f"{owners[name]} already has that name. Rename one of them or remove one "
                        "extension from the config; Abhed will not pick by load order.")
                owners[name] = f"extension {proc.name!r}"
                tool = make_provided_tool(spec, proc.name, self)
                found[name] = tool
                self._provided[name] = (proc, tool)
        return found

    def invoke(self, tool: str, call_id: str, args: dict[str, Any]) -> ToolResult:
        """Run a provided tool by asking its extension."""
        proc, _ = self._provided[tool]
        if proc.dead is not None:
            return failure("extension_dead", f"{tool} is provided by extension {proc.name}, which "
                           f"died earlier ({proc.dead}). It cannot run this session; do without it.")
        reply = self._ask(proc, "invoke_tool", {"call_id": call_id, "tool": tool, "args": args})
        if proc.dead is not None:
            return failure("extension_dead", f"{tool} failed: its extension {proc.name} died "
                           f"({proc.dead}). It cannot run again this session; do without it.")
        if reply.error is not None:
            return failure("extension_tool_error", f"{tool} failed: {reply.error}")
        if reply.result is None:
            return failure("extension_tool_error", f"{tool} returned no result (its extension "
                           f"{proc.name} replied without a `result` field).")
        return ToolResult(ok=True, content=reply.result)

    def close(self, reason: str = "done") -> None:
        """Send ``session_end`` and stop every process."""
        try:
            self.session_end(reason)
        finally:
            for proc in self._procs:
                proc.close()
