"""Each event as an OCSF record, for the site's SIEM (docs/event-log.md, "OCSF for the SIEM").

OCSF 1.8.0, the version NVIDIA OpenShell writes: a SIEM that already parses
one agent sandbox's records parses ours with the same mapping, and 1.8.0 is
the newest release whose schema is shipped, offline, by the validator the
tests use (``ocsf-json-schema``: the schema server's own export, Apache-2.0).

One Abhed event is one OCSF record, so every record traces back to exactly
one row of the chain: ``metadata.sequence`` is the event's ``seq``,
``metadata.uid`` its ``hash``, and ``unmapped.abhed`` holds the rest of the
row's coordinates (``session_id``, ``session_seq``, ``prev_hash``, ``type``)
and whatever of the event has no OCSF attribute.  The mapping is stateful in
one small way: an observation does not repeat its call's arguments, so the
mapper remembers each action's arguments (a bounded number of calls) to give
a ``bash`` run its command line, and each session's model (from
``run_started``) to name it on the model's turns.

Free text is capped (``TEXT_CAP`` characters per string, ``DATA_CAP`` bytes
per structured value) so a SIEM's line limit never cuts a record in the
middle: a cut sets ``metadata.is_truncated``; the whole event stays in the
log and in the JSONL export.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from appliance.events import _models as ev

if TYPE_CHECKING:  # a type only: events import no model service (docs/performance.md)
    from models import StoredRequest

__all__ = ["OCSF_VERSION", "OcsfMapper", "TEXT_CAP", "DATA_CAP", "SETTINGS_DIGEST_KEYS",
           "export_record", "request_record"]

OCSF_VERSION = "1.8.0"
TEXT_CAP = 2048
DATA_CAP = 4096
_CALLS_KEPT = 4096  # actions remembered for their observations (a run rarely has more open)

# What the session's start records about what governed it (docs/configuration.md, site
# layer): these become the OCSF ``policy`` of the session's Application Lifecycle record.
SETTINGS_DIGEST_KEYS = ("release", "bundle_manifest_sha256", "signing_key_ids",
                        "site_settings_sha256", "effective_settings_sha256", "model_signature")

# class_uid -> (class_name, category_uid, category_name)
_CLASSES: dict[int, tuple[str, int, str]] = {
    0: ("Base Event", 0, "Uncategorized"),
    1001: ("File System Activity", 1, "System Activity"),
    1007: ("Process Activity", 1, "System Activity"),
    1008: ("Event Log Activity", 1, "System Activity"),
    6002: ("Application Lifecycle", 6, "Application Activity"),
    6003: ("API Activity", 6, "Application Activity"),
    6008: ("Application Error", 6, "Application Activity"),
}
_OTHER = 99
_INFO, _LOW, _MEDIUM, _HIGH = 1, 2, 3, 4
_SEVERITY = {1: "Informational", 2: "Low", 3: "Medium", 4: "High"}
_ACTION = {"allow": (1, "Allowed"), "deny": (2, "Denied"), "ask": (_OTHER, "Ask")}
_STATUS = {True: (1, "Success"), False: (2, "Failure")}
_SHA256 = 3  # fingerprint.algorithm_id
_REGULAR_FILE = 1
_READ_TOOLS = ("read",)
_FILE_TOOLS = ("write", "edit")


def _abhed_version() -> str:
    try:
        return version("abhed")
    except PackageNotFoundError:  # pragma: no cover - a source tree without its metadata
        return "unknown"


def _ms(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


class _Cut:
    """Caps strings and structured values; remembers whether anything was cut."""

    def __init__(self, text_cap: int, data_cap: int) -> None:
        self.text_cap, self.data_cap, self.cut = text_cap, data_cap, False

    def text(self, value: str) -> str:
        if len(value) <= self.text_cap:
            return value
        self.cut = True
        return value[: self.text_cap] + f"… [cut at {self.text_cap} of {len(value)} characters]"

    def data(self, value: Any) -> Any:
        """A JSON value as is when small, else its JSON text cut (json_t takes either)."""
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        if len(text.encode()) <= self.data_cap:
            return value
        self.cut = True
        return text[: self.data_cap // 4] + f"… [cut: {len(text)} characters of JSON]"


class OcsfMapper:
    """Turns stored events into OCSF records, in order; one mapper per stream.

    Args:
        log_name: which log the records come from (its path), as ``metadata.log_name``.
        product_version: ``metadata.product.version``; default: this Abhed's.
        text_cap / data_cap: the caps on free text and structured values; the
            forwarder lowers them when a record is still over its line limit.
    """

    def __init__(self, *, log_name: str, product_version: str | None = None,
                 text_cap: int = TEXT_CAP, data_cap: int = DATA_CAP) -> None:
        self.product = {"name": "Abhed", "vendor_name": "Abhed",
                        "version": product_version or _abhed_version()}
        self.log_name = log_name
        self.text_cap, self.data_cap = text_cap, data_cap
        self._calls: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._models: dict[str, dict[str, str]] = {}

    # -- the envelope --------------------------------------------------------
    def record(self, *, seq: int, session_seq: int, prev_hash: str, hash: str,
               event: ev.Event, text_cap: int | None = None,
               data_cap: int | None = None) -> dict[str, Any]:
        """The OCSF record for one stored event (a new dict; the event is not changed)."""
        cut = _Cut(text_cap or self.text_cap, data_cap or self.data_cap)
        class_uid, activity_id, activity_name, severity, body, extra = self._map(event, cut)
        class_name, category_uid, category_name = _CLASSES[class_uid]
        profiles = sorted(p for p in body.pop("_profiles", ["datetime"]))
        correlation = getattr(event, "call_id", "") or getattr(event, "run_id", "")
        metadata: dict[str, Any] = {
            "version": OCSF_VERSION, "product": self.product, "profiles": profiles,
            "uid": hash, "sequence": seq, "event_code": event.type,
            "log_provider": "abhed", "log_name": self.log_name, "original_time": event.ts,
        }
        if correlation:
            metadata["correlation_uid"] = correlation
        record: dict[str, Any] = {
            "class_uid": class_uid, "class_name": class_name,
            "category_uid": category_uid, "category_name": category_name,
            "activity_id": activity_id, "activity_name": activity_name,
            "type_uid": class_uid * 100 + activity_id,
            "type_name": f"{class_name}: {activity_name}",
            "severity_id": severity, "severity": _SEVERITY[severity],
            "time": _ms(event.ts), "time_dt": event.ts,
            "metadata": metadata,
            **body,
        }
        record["unmapped"] = {"abhed": {"session_id": event.session_id, "session_seq": session_seq,
                                        "prev_hash": prev_hash, "hash": hash, "type": event.type,
                                        **extra}}
        if cut.cut:
            metadata["is_truncated"] = True
        return record

    def _actor(self, event: ev.Event) -> dict[str, Any]:
        return {"app_name": "abhed", "session": {"uid": event.session_id}}

    def _ai_model(self, session_id: str) -> dict[str, str] | None:
        return self._models.get(session_id)

    # -- one method per kind ---------------------------------------------------
    def _map(self, e: ev.Event, cut: _Cut) -> tuple[int, int, str, int, dict[str, Any], dict[str, Any]]:
        """(class_uid, activity_id, activity_name, severity_id, attributes, unmapped extras)."""
        actor = self._actor(e)
        if isinstance(e, ev.SessionStarted):
            return self._session_started(e, cut)
        if isinstance(e, ev.SessionEnded):
            return 6002, 4, "Stop", _INFO, {
                "app": self.product,
                "message": cut.text(f"session {e.session_id} ended: {e.reason}")}, {}
        if isinstance(e, ev.ActionEvent):
            self._remember(e.session_id, e.call_id, e.args)
            return self._api(e, "Tool Call", actor, cut, request_data=e.args,
                             message=f"{e.source} asked for {e.tool}", extra={"source": e.source})
        if isinstance(e, ev.PolicyDecision):
            return self._decision(e, actor, cut)
        if isinstance(e, ev.ApprovalEvent):
            return self._approval(e, actor, cut)
        if isinstance(e, ev.ObservationEvent):
            return self._observation(e, actor, cut)
        if isinstance(e, ev.PolicyRuleAdded):
            policy = {"name": e.rule_id, "data": cut.data(e.rule), "is_applied": True,
                      "desc": cut.text(f"always-allow rule stored for this session by {e.added_by}")}
            return self._api(e, "Rule Added", actor, cut, policy=policy,
                             message=f"{e.added_by} added rule {e.rule_id}",
                             extra={"added_by": e.added_by}, profiles=("security_control",))
        if isinstance(e, ev.RunStarted):
            self._models[e.session_id] = {"name": e.model or "unknown", "ai_provider": e.provider or "unknown"}
            return self._api(e, "Run Started", actor, cut, operation="run",
                             message=f"run {e.run_id} started: {e.model} via {e.provider}, mode {e.mode}",
                             extra={"mode": e.mode, "mode_chosen_by": e.mode_chosen_by,
                                    "limits": e.limits, "tools": e.tools, "resumed": e.resumed,
                                    "system_prompt_sha256": e.system_prompt_sha256})
        if isinstance(e, ev.RunEnded):
            ok = e.reason == "done"
            return self._api(e, "Run Ended", actor, cut, operation="run", ok=ok,
                             status_detail=e.reason, message=e.message,
                             context={"prompt_tokens": e.prompt_tokens,
                                      "completion_tokens": e.completion_tokens,
                                      "total_tokens": e.prompt_tokens + e.completion_tokens,
                                      "ai_role_id": 4, "ai_role": "Agent"},
                             extra={"turns": e.turns, "answer": cut.text(e.answer or "")})
        if isinstance(e, ev.UserMessage):
            return self._api(e, "Prompt" if e.kind == "prompt" else "Steer", actor, cut,
                             operation="prompt", message=e.text,
                             context={"ai_role_id": 1, "ai_role": "User"})
        if isinstance(e, ev.ModelTurn):
            usage = e.usage
            context: dict[str, Any] = {"ai_role_id": 2, "ai_role": "Assistant"}
            if usage is not None:
                context.update(prompt_tokens=usage.prompt_tokens,
                               completion_tokens=usage.completion_tokens,
                               total_tokens=usage.prompt_tokens + usage.completion_tokens)
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in e.tool_calls]
            return self._api(e, "Model Turn", actor, cut, operation="chat.completions",
                             message=e.text or f"{len(calls)} tool call(s)", context=context,
                             response_data=calls, duration_ms=e.duration_ms,
                             extra={"turn": e.turn, "finish_reason": e.finish_reason,
                                    "request_id": e.request_id})
        if isinstance(e, ev.DecisionBasis):
            policy = {"name": "decision basis", "uid": e.digest, "is_applied": True,
                      "data": cut.data({"policy": e.policy, "extensions": e.extensions,
                                        "mcp_pins": e.mcp_pins, "tools": sorted(e.tools)})}
            return self._api(e, "Decision Basis", actor, cut, operation="policy", policy=policy,
                             message=f"the rules in force for this session: basis {e.digest}",
                             profiles=("security_control",))
        if isinstance(e, (ev.TodoUpdated, ev.PlanUpdated)):
            name = "Todo Updated" if isinstance(e, ev.TodoUpdated) else "Plan Updated"
            data = e.model_dump(mode="json", include={"items", "title", "steps", "notes"})
            return self._api(e, name, actor, cut, operation=e.type, response_data=data,
                             message=name.lower())
        if isinstance(e, ev.Compacted):
            return self._api(e, "Compacted", actor, cut, operation="compact",
                             message=f"conversation compacted ({e.strategy}, {e.trigger}): "
                                     f"{e.tokens_before} -> {e.tokens_after} tokens",
                             extra={"masked_call_ids": e.masked_call_ids,
                                    "summarised_through_seq": e.summarised_through_seq})
        if isinstance(e, (ev.TaskStarted, ev.TaskEnded)):
            started = isinstance(e, ev.TaskStarted)
            data = e.model_dump(mode="json", exclude={"schema_version", "session_id", "ts", "type"})
            return self._api(e, "Subagent Started" if started else "Subagent Ended", actor, cut,
                             operation="task", response_data=data,
                             ok=e.status == "done" if isinstance(e, ev.TaskEnded) else None,
                             message=(f"subagent session {e.child_session_id} "
                                      f"{'started' if started else 'ended'}"))
        if isinstance(e, ev.UndoApplied):
            return 0, _OTHER, e.kind.capitalize(), _LOW, {
                "message": cut.text(f"{e.kind} by {e.requested_by}: {len(e.files)} file(s); "
                                    f"{e.bash_calls_not_undone} bash call(s) not undone")}, {
                "files": [f.model_dump(mode="json") for f in e.files],
                "run_ids": e.run_ids, "requested_by": e.requested_by}
        if isinstance(e, ev.ExtensionLog):
            return self._api(e, "Extension Log", actor, cut, operation=e.event,
                             message=f"{e.extension}: {e.message}",
                             extra={"extension": e.extension, "kind": e.kind})
        if isinstance(e, (ev.StartupNotice, ev.ExtensionDied)):
            if isinstance(e, ev.StartupNotice):
                text, extra = e.message, {"kind": e.kind, "subject": e.subject}
            else:
                text, extra = (f"extension {e.extension} died handling {e.event}: {e.reason}",
                               {"extension": e.extension})
            return 6008, 1, "General Error", _MEDIUM, {"message": cut.text(text)}, extra
        if isinstance(e, ev.SegmentStarted):
            return 1008, 5, "Rotate", _INFO, self._log_attrs(
                e, cut, f"segment {e.segment} continues {e.previous_segment} from event "
                        f"{e.previous_head_seq} ({e.reason})"), {
                "previous_head_hash": e.previous_head_hash}
        if isinstance(e, ev.SegmentDeleted):
            return 1008, 2, "Delete", _LOW, self._log_attrs(
                e, cut, f"segment {e.segment} (events {e.first_seq}..{e.last_seq}) deleted by "
                        f"{e.deleted_by}"), {"head_hash": e.head_hash, "sha256": e.sha256}
        if isinstance(e, ev.LogRepaired):
            return 1008, _OTHER, "Repair", _HIGH, self._log_attrs(
                e, cut, f"log repaired: kept events up to {e.last_good_seq}, lost "
                        f"{e.lost_events}; damaged file kept as {e.damaged_file}"), {
                "damage": e.damage, "damaged_sha256": e.damaged_sha256,
                "highest_seq_seen": e.highest_seq_seen, "method": e.method}
        if isinstance(e, ev.ForwardingChanged):
            severity = _INFO if e.state == "restored" and not e.lost else _MEDIUM
            text = (f"forwarding to {e.destination} {e.state}"
                    + (f": {e.error}" if e.error and e.state == "interrupted" else "")
                    + (f"; {e.missed} event(s) missed, {e.replayed} sent late, {e.lost} never sent"
                       if e.state != "interrupted" else ""))
            return 1008, _OTHER, f"Forwarding {e.state.capitalize()}", severity, \
                self._log_attrs(e, cut, text), e.model_dump(
                    mode="json", exclude={"schema_version", "session_id", "ts", "type"})
        raise TypeError(f"no OCSF mapping for event type {e.type!r}")  # pragma: no cover

    def _session_started(self, e: ev.SessionStarted, cut: _Cut) -> tuple[int, int, str, int, dict[str, Any], dict[str, Any]]:
        body: dict[str, Any] = {
            "app": {**self.product, "version": e.abhed_version or self.product["version"]},
            "message": cut.text(f"session {e.session_id} started in {e.workspace}"),
        }
        governed = {k: e.settings[k] for k in SETTINGS_DIGEST_KEYS if k in e.settings}
        if governed:
            body["policy"] = {"name": "abhed settings", "is_applied": True,
                              "uid": str(governed.get("effective_settings_sha256", "none")),
                              "version": str(governed.get("release", "")), "data": governed}
            body["_profiles"] = ["datetime", "security_control"]
        extra: dict[str, Any] = {"workspace": e.workspace, "settings": cut.data(e.settings),
                                 "host": e.host, "account": e.account}
        if e.parent_session_id:
            extra.update(parent_session_id=e.parent_session_id, parent_call_id=e.parent_call_id)
        return 6002, 3, "Start", _INFO, body, extra

    def _decision(self, e: ev.PolicyDecision, actor: dict[str, Any],
                  cut: _Cut) -> tuple[int, int, str, int, dict[str, Any], dict[str, Any]]:
        policy = {"name": e.decided_by, "uid": e.basis_digest or "unrecorded",
                  "desc": cut.text(e.reason), "is_applied": True}
        action_id, action = _ACTION[e.verdict]
        disposition = {"allow": (1, "Allowed"), "deny": (2, "Blocked"),
                       "ask": (14, "Delayed")}[e.verdict]
        return self._api(
            e, "Policy Decision", actor, cut, request_data=e.args, policy=policy,
            authorizations=[{"decision": e.verdict, "policy": policy}],
            security=(action_id, action, *disposition),
            severity=_LOW if e.verdict == "deny" else _INFO,
            message=f"{e.tool}: {e.verdict} by {e.decided_by}: {e.reason}",
            extra={"commands": e.commands}, profiles=("security_control",))

    def _approval(self, e: ev.ApprovalEvent, actor: dict[str, Any],
                  cut: _Cut) -> tuple[int, int, str, int, dict[str, Any], dict[str, Any]]:
        approver = e.approver
        if approver:
            actor = {**actor, "user": {"name": approver}}
        who = f"{approver} via {e.decided_by}" if approver else e.decided_by
        policy = {"name": f"approval:{e.decided_by}", "desc": cut.text(e.reason or who),
                  "is_applied": True}
        action_id, action = _ACTION[e.decision]
        disposition = (8, "Approved") if e.decision == "allow" else (25, "Rejected")
        return self._api(
            e, "Approval", actor, cut, policy=policy,
            authorizations=[{"decision": e.decision, "policy": policy}],
            security=(action_id, action, *disposition),
            severity=_LOW if e.decision == "deny" else _INFO,
            message=f"{e.tool}: {e.decision} by {who}" + (f": {e.reason}" if e.reason else ""),
            extra={"decided_by": e.decided_by}, profiles=("security_control",))

    def _observation(self, e: ev.ObservationEvent, actor: dict[str, Any],
                     cut: _Cut) -> tuple[int, int, str, int, dict[str, Any], dict[str, Any]]:
        r = e.result
        d = r.details
        args = self._calls.pop((e.session_id, e.call_id), None)
        status_id, status = _STATUS[r.ok]
        common: dict[str, Any] = {
            "actor": actor, "status_id": status_id, "status": status,
            "duration": int(e.duration_ms), "message": cut.text(r.content.split("\n", 1)[0]),
        }
        if r.error is not None:
            common["status_detail"] = r.error.code
        extra: dict[str, Any] = {"tool": e.tool, "call_id": e.call_id,
                                 "artifacts": [a.model_dump(mode="json") for a in e.artifacts]}
        if e.tool == "bash" and "exit_code" in d and isinstance(args, dict):
            command = str(args.get("command", ""))
            ok = r.ok and d.get("exit_code") == 0
            status_id, status = _STATUS[ok]
            common.update(status_id=status_id, status=status)
            backend = str(d.get("sandbox") or "unknown")
            body = {**common, "process": {"uid": e.call_id, "cmd_line": cut.text(command),
                                          "name": "bash", "sandbox": backend,
                                          "working_directory": str(d.get("cwd") or "")},
                    "device": {"type_id": 6, "type": "Virtual", "name": f"abhed sandbox ({backend})",
                               "uid": e.session_id},
                    "launch_type_id": 1, "launch_type": "Spawn"}
            if isinstance(d.get("exit_code"), int):
                body["exit_code"] = d["exit_code"]
            extra.update(signal=d.get("signal"), timed_out=d.get("timed_out"))
            return 1007, 1, "Launch", _INFO, body, extra
        path = d.get("path") if isinstance(d.get("path"), str) else None
        if path and r.ok and (e.tool in _READ_TOOLS or (e.tool in _FILE_TOOLS and d.get("changed"))):
            digest = d.get("sha256_after") or (d.get("file_state") or {}).get("sha256")
            file: dict[str, Any] = {"name": path.rsplit("/", 1)[-1] or path, "path": path,
                                    "type_id": _REGULAR_FILE, "type": "Regular File"}
            if isinstance(digest, str):
                file["hashes"] = [{"algorithm_id": _SHA256, "algorithm": "SHA-256", "value": digest}]
            body = {**common, "file": file,
                    "device": {"type_id": 0, "type": "Unknown", "name": "abhed workspace host"}}
            if e.tool in _READ_TOOLS:
                return 1001, 2, "Read", _INFO, body, extra
            if isinstance(d.get("diff"), str):
                body["file_diff"] = cut.text(d["diff"])
            if d.get("sha256_before"):
                extra["sha256_before"] = d["sha256_before"]
            created = bool(d.get("created"))
            return 1001, 1 if created else 3, "Create" if created else "Update", _INFO, body, extra
        cls, act, name, sev, body, more = self._api(
            e, "Tool Result", actor, cut, ok=r.ok, response_data=r.details, duration_ms=e.duration_ms,
            message=r.content.split("\n", 1)[0],
            status_detail=r.error.code if r.error is not None else None)
        return cls, act, name, sev, body, {**more, **extra}

    # -- shared shapes ---------------------------------------------------------
    def _remember(self, session_id: str, call_id: str, args: Any) -> None:
        self._calls[(session_id, call_id)] = args
        while len(self._calls) > _CALLS_KEPT:
            self._calls.popitem(last=False)

    def _api(self, e: ev.Event, name: str, actor: dict[str, Any], cut: _Cut, *,
             operation: str | None = None, request_data: Any = None, response_data: Any = None,
             message: str = "", ok: bool | None = None, status_detail: str | None = None,
             policy: dict[str, Any] | None = None,
             authorizations: list[dict[str, Any]] | None = None,
             security: tuple[int, str, int, str] | None = None, severity: int = _INFO,
             context: dict[str, Any] | None = None, duration_ms: float | None = None,
             extra: dict[str, Any] | None = None, profiles: tuple[str, ...] = ()
             ) -> tuple[int, int, str, int, dict[str, Any], dict[str, Any]]:
        """An API Activity (6003), activity Other: a tool call, a decision, a model turn."""
        tool = getattr(e, "tool", None)
        call_id = getattr(e, "call_id", None) or getattr(e, "run_id", None) or e.session_id
        api: dict[str, Any] = {"operation": operation or str(tool or e.type),
                               "service": {"name": "abhed tools" if tool else "abhed agent"},
                               "request": {"uid": str(call_id)}}
        if request_data is not None:
            api["request"]["data"] = cut.data(request_data)
        if response_data is not None:
            api["response"] = {"data": cut.data(response_data)}
        body: dict[str, Any] = {"api": api, "actor": actor,
                                "src_endpoint": {"svc_name": "abhed", "name": "abhed agent"},
                                "message": cut.text(message)}
        wanted = {"datetime", *profiles}
        model = self._ai_model(e.session_id)
        if context is not None or isinstance(e, (ev.ModelTurn, ev.RunStarted)):
            wanted.add("ai_operation")
            if model is not None:
                body["ai_model"] = model
            if context is not None:
                body["message_context"] = {"uid": e.session_id, "service": {"name": "abhed agent"},
                                           **context}
        if ok is not None:
            body["status_id"], body["status"] = _STATUS[ok]
        if status_detail:
            body["status_detail"] = status_detail
        if duration_ms is not None:
            body["duration"] = int(duration_ms)
        if policy is not None:
            body["policy"] = policy
        if authorizations is not None:
            body["authorizations"] = authorizations
        if security is not None:
            body["action_id"], body["action"], body["disposition_id"], body["disposition"] = security
        body["_profiles"] = sorted(wanted)
        return 6003, _OTHER, name, severity, body, dict(extra or {})

    def _log_attrs(self, e: ev.Event, cut: _Cut, message: str) -> dict[str, Any]:
        return {"actor": {"app_name": "abhed"},
                "device": {"type_id": 0, "type": "Unknown", "name": "abhed event log host"},
                "log_name": self.log_name, "log_provider": "abhed",
                "message": cut.text(message)}


def export_record(mapper: OcsfMapper, manifest: dict[str, Any]) -> dict[str, Any]:
    """The last record of an OCSF export: Event Log Activity "Export", holding the manifest.

    It is not an event of the log (it has no ``seq`` or ``hash`` of its own):
    ``metadata.uid`` is the exported range's last hash prefixed ``export:``.
    """
    ts = str(manifest["exported_at"])
    return {
        "class_uid": 1008, "class_name": "Event Log Activity", "category_uid": 1,
        "category_name": "System Activity", "activity_id": 3, "activity_name": "Export",
        "type_uid": 100803, "type_name": "Event Log Activity: Export",
        "severity_id": _INFO, "severity": _SEVERITY[_INFO], "time": _ms(ts), "time_dt": ts,
        "metadata": {"version": OCSF_VERSION, "product": mapper.product, "profiles": ["datetime"],
                     "uid": f"export:{manifest['last_hash']}", "event_code": "export",
                     "log_provider": "abhed", "log_name": mapper.log_name, "original_time": ts},
        "actor": {"app_name": "abhed"},
        "device": {"type_id": 0, "type": "Unknown", "name": "abhed event log host"},
        "log_name": mapper.log_name, "log_provider": "abhed",
        "message": (f"exported events {manifest['first_seq']}..{manifest['last_seq']} "
                    f"({manifest['events']} records, {manifest['withheld']} of other sessions "
                    f"left out); head {manifest['head_seq']} {manifest['head_hash']}"),
        "unmapped": {"abhed": {"manifest": manifest}},
    }


def request_record(stored: StoredRequest, *, log_name: str, product: dict[str, str],
                   text_cap: int = TEXT_CAP) -> dict[str, Any]:
    """One record of the model service's request log as OCSF: API Activity, "Model Request".

    The same envelope as an event's (``metadata.sequence`` its ``seq``,
    ``metadata.uid`` its ``hash``), so a SIEM that parses the agent's records
    parses the model side's; ``actor.user`` is the engineer and
    ``src_endpoint.hostname`` the host the service authenticated, and
    ``unmapped.abhed`` holds the chain and the ids the caller asserted.
    """
    r = stored.record
    cut = _Cut(text_cap, DATA_CAP)
    ok = r.outcome == "ok"
    severity = _INFO if ok or r.outcome == "cancelled" else _LOW
    session = r.session_id or "none"
    message = (f"{r.engineer}@{r.host}: {r.outcome} ({r.status}), {r.tokens_in} tokens in, "
               f"{r.tokens_out} out, session {session}, request {r.request_id or 'none'}"
               + (f": {r.detail}" if r.detail else ""))
    api: dict[str, Any] = {"operation": r.endpoint or "unknown",
                           "service": {"name": "abhed model service"},
                           "request": {"uid": r.request_id or f"unnamed:{stored.seq}"},
                           "response": {"code": r.status}}
    if r.detail:
        api["response"]["error_message"] = cut.text(r.detail)
    started = _ms(r.started_at)
    record: dict[str, Any] = {
        "class_uid": 6003, "class_name": "API Activity", "category_uid": 6,
        "category_name": "Application Activity", "activity_id": _OTHER,
        "activity_name": "Model Request", "type_uid": 6003 * 100 + _OTHER,
        "type_name": "API Activity: Model Request",
        "severity_id": severity, "severity": _SEVERITY[severity],
        "time": _ms(r.ended_at), "time_dt": r.ended_at,
        "start_time": started, "end_time": _ms(r.ended_at),
        "duration": max(0, _ms(r.ended_at) - started),
        "metadata": {"version": OCSF_VERSION, "product": product,
                     "profiles": ["ai_operation", "datetime"], "uid": stored.hash,
                     "sequence": stored.seq, "event_code": "model_request",
                     "log_provider": "abhed", "log_name": log_name,
                     "original_time": r.ended_at},
        "actor": {"app_name": "abhed model service", "user": {"name": r.engineer},
                  **({"session": {"uid": r.session_id}} if r.session_id else {})},
        "src_endpoint": {"hostname": r.host},
        "api": api,
        "status_id": _STATUS[ok][0], "status": _STATUS[ok][1],
        "status_code": str(r.status),
        "message": cut.text(message),
        "ai_model": {"name": r.model or "unknown", "ai_provider": "vllm"},
        "message_context": {"uid": session, "service": {"name": "abhed model service"},
                            "prompt_tokens": r.tokens_in, "completion_tokens": r.tokens_out,
                            "total_tokens": r.tokens_in + r.tokens_out},
        "unmapped": {"abhed": {"seq": stored.seq, "prev_hash": stored.prev_hash,
                               "hash": stored.hash, "type": "model_request",
                               "host": r.host, "engineer": r.engineer,
                               "session_id": r.session_id, "request_id": r.request_id,
                               "outcome": r.outcome}},
    }
    if not ok:
        record["status_detail"] = r.outcome
    if cut.cut:
        record["metadata"]["is_truncated"] = True
    return record
