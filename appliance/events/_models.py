"""The events a session records: a versioned discriminated union.

Every event carries ``type`` (the discriminator), ``schema_version`` and the
``session_id``/``ts`` envelope.  Old rows are upgraded on read by
:func:`migrate`, so readers only ever see the current shape.  The union is
what a UI renders and what a conformance probe scores, so every field is
meant to be read by a program, not just a person.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tools import ToolResult

__all__ = [
    "SCHEMA_VERSION",
    "ActionEvent",
    "ApprovalEvent",
    "ArtifactRef",
    "Compacted",
    "FileRestore",
    "PlanStepState",
    "PlanUpdated",
    "TaskEnded",
    "TaskStarted",
    "TodoEntry",
    "TodoUpdated",
    "UndoApplied",
    "ExtensionDied",
    "ExtensionLog",
    "ForwardingChanged",
    "PolicyDecision",
    "PolicyRuleAdded",
    "ModelTurn",
    "RunEndReason",
    "RunEnded",
    "RunStarted",
    "TurnToolCall",
    "TurnUsage",
    "UserMessage",
    "Event",
    "EVENT_ADAPTER",
    "EVENT_CLASSES",
    "ObservationEvent",
    "SessionEnded",
    "SessionStarted",
    "StartupNotice",
    "now_iso",
    "LOG_SESSION",
    "DecisionBasis",
    "LogRepaired",
    "SegmentDeleted",
    "SegmentStarted",
]

# 2: ModelTurn gained request_id, SessionStarted host and account (all optional: a
# version-1 body reads unchanged).  A reader
# older than a log refuses its newer bodies by name instead of misreading them.
# 3: ModelTurn and RunEnded gained retries, RunEnded the reason model_stream_lost (optional
# or new values: a version-2 body reads unchanged).
SCHEMA_VERSION = 3


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    schema_version: int = SCHEMA_VERSION
    session_id: str
    ts: str = Field(default_factory=now_iso, description="UTC, ISO 8601 with microseconds.")


class SessionStarted(_Base):
    """A session began: where it works and with what."""

    type: Literal["session_started"] = "session_started"
    workspace: str
    abhed_version: str
    settings: dict[str, Any] = Field(default_factory=dict)
    parent_session_id: str | None = Field(
        default=None, description="For a subagent's session: the session whose task call made it.")
    parent_call_id: str | None = Field(default=None, description="That task call's id.")
    host: str = Field(default="", description="The host the session ran on (its hostname); "
                      "empty in logs before schema version 2.  The auditor's join checks that a "
                      "collected log belongs to the host it was collected as.")
    account: str = Field(default="", description="The Unix account the session ran as; empty "
                         "in logs before schema version 2.")


class ActionEvent(_Base):
    """A tool call as the model (or caller) asked for it, recorded before anything runs."""

    type: Literal["action"] = "action"
    call_id: str
    tool: str
    args: Any = Field(description="The arguments exactly as given; may be malformed.")
    source: str = Field(default="model", description="Who asked: model, cli, rpc, subagent.")


class ArtifactRef(BaseModel):
    """A blob kept beside the log (a cut output, a file's preimage), named by its digest."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    sha256: str
    bytes: int
    kind: Literal["output", "preimage"]
    source: str = Field(default="", description="The file a preimage is of; empty for an output.")


class ObservationEvent(_Base):
    """What a tool call produced, recorded before the result reaches the model."""

    type: Literal["observation"] = "observation"
    call_id: str
    tool: str
    result: ToolResult
    duration_ms: float = Field(description="From the action to the result, approval wait included.")
    approval_wait_ms: float = Field(
        default=0.0, description="Of duration_ms, the time spent waiting for a person's answer "
        "(0 when nobody was asked), so a door can show run time and wait apart.")
    artifacts: list[ArtifactRef] = Field(
        default_factory=list, description="Blobs kept whole for this call: a cut output, a preimage.")


class SessionEnded(_Base):
    """This process stopped using the session (it may be continued later with ``--session``)."""

    type: Literal["session_ended"] = "session_ended"
    reason: str


class StartupNotice(_Base):
    """Something set-up refused or degraded: the auditor sees it, the engineer learns why a
    tool is missing.  Every door also says it (stderr, or rpc ``start``'s ``notices``)."""

    type: Literal["startup_notice"] = "startup_notice"
    kind: Literal["mcp_refused", "extension_dead", "sandbox_fallback", "sandbox_unavailable"]
    subject: str = Field(description="The MCP server, extension or sandbox backend concerned.")
    message: str = Field(description="What happened and what to do, as shown at the door.")


# -- the agent loop's events (one run = one prompt worked to an end) ----------

RunEndReason = Literal[
    "done",            # the model answered without calling a tool
    "max_turns",       # limits.max_turns model turns were used
    "max_tokens",      # limits.max_tokens (prompt + completion, summed) were used
    "deadline",        # limits.deadline_s of wall-clock time passed
    "interrupted",     # Ctrl-C, rpc abort, or the caller's cancel
    "provider_error",  # the model server failed in a way retrying did not fix
    "model_stream_lost",  # the model host went away after part of the reply had come back
    "repeated_failure",  # the same call failed (or was denied) loop.max_repeated_failures times in a row
    "context_full",    # the conversation no longer fits the context and compaction could not help
    "budget",          # a subagent's reserved share of its parent's budget ran out
]


class RunStarted(_Base):
    """The loop began working on a prompt: with which model, limits and prompt prefix."""

    type: Literal["run_started"] = "run_started"
    run_id: str
    provider: str
    model: str
    mode: str = Field(description="The effective policy mode: plan, ask or auto.")
    mode_chosen_by: str = Field(
        default="operator", description="Who chose it: caller (a flag or rpc field within the "
        "operator's ceiling), operator (policy.mode in config), default (nothing configured).")
    limits: dict[str, Any] = Field(default_factory=dict)
    sampling: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list, description="Tool names offered, in prompt order.")
    system_prompt_sha256: str = Field(description="Identifies the stable prompt prefix.")
    instructions_file: str | None = Field(
        default=None, description="The project instructions read into the prompt: ABHED.md, else AGENTS.md.")
    resumed: bool = Field(default=False,
                          description="The conversation was rebuilt from this session's earlier events.")


class UserMessage(_Base):
    """Text a person (or caller) gave the agent: the prompt, or a steer mid-run."""

    type: Literal["user_message"] = "user_message"
    run_id: str
    kind: Literal["prompt", "steer"] = "prompt"
    text: str


class TurnToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    id: str
    name: str
    arguments: str = Field(description="Raw JSON text as the model wrote it; may be malformed.")


class TurnUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0


class ModelTurn(_Base):
    """One assistant reply, assembled from the stream, before any of its calls run."""

    type: Literal["model_turn"] = "model_turn"
    run_id: str
    turn: int = Field(ge=1)
    text: str
    tool_calls: list[TurnToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: TurnUsage | None = None
    duration_ms: float = Field(description="Time waiting on the model for this turn.")
    request_id: str | None = Field(
        default=None, description="The id sent to the model service with this turn's request "
        "(X-Abhed-Request), retries included; the auditor's join matches the model side's "
        "records to it.  None in logs written before schema version 2, and for turns asked of "
        "a provider outside a governed run (the probe).")
    retries: list[str] = Field(
        default_factory=list, description="Each attempt retried before this reply, and why: "
        "the model host went away before any token came back (refused, reset, a 502/503 from "
        "the router).")


class ApprovalEvent(_Base):
    """A call that needed an answer, and the answer: who gave it and why."""

    type: Literal["approval"] = "approval"
    run_id: str
    call_id: str
    tool: str
    decision: Literal["allow", "deny"]
    decided_by: str = Field(description="auto, rpc, tui, headless ...")
    reason: str = ""
    approver: str = Field(
        default="", description="The account of the person who answered: the user name and uid "
        "the session runs as (`ana (uid 1000)`), who saw the question in the TUI or whose rpc "
        "client answered; empty when no person did (headless, or a log from before it existed).")


class RunEnded(_Base):
    """The run stopped; ``reason`` says why, ``answer`` is the final text if the model finished."""

    type: Literal["run_ended"] = "run_ended"
    run_id: str
    reason: RunEndReason
    message: str = Field(description="A sentence for a person: what ended the run and what to do.")
    turns: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answer: str | None = None
    retries: list[str] = Field(
        default_factory=list, description="Attempts at the last request retried before the "
        "run ended (provider_error, model_stream_lost), each with why.")


# -- working memory, artifacts, compaction, undo, subagents --------------------


class TodoEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    id: str
    content: str
    status: Literal["pending", "in_progress", "done"]


class TodoUpdated(_Base):
    """The model replaced its todo list (a ``todo`` call that succeeded); the whole list."""

    type: Literal["todo_updated"] = "todo_updated"
    call_id: str
    items: list[TodoEntry]


class PlanStepState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    step: str
    status: Literal["pending", "in_progress", "done", "skipped"]


class PlanUpdated(_Base):
    """The model wrote or replaced the plan (a ``plan`` call that succeeded)."""

    type: Literal["plan_updated"] = "plan_updated"
    call_id: str
    title: str
    steps: list[PlanStepState]
    notes: str = ""


class Compacted(_Base):
    """The conversation sent to the model was shortened: what was masked or summarised."""

    type: Literal["compacted"] = "compacted"
    run_id: str = ""
    trigger: Literal["auto", "manual"]
    strategy: Literal["mask", "summary"]
    masked_call_ids: list[str] = Field(default_factory=list,
                                       description="Tool results replaced by a one-line stub.")
    summarised_through_seq: int | None = Field(
        default=None, description="Events up to this session_seq are represented by `summary`.")
    summary: str = ""
    tokens_before: int
    tokens_after: int
    context_tokens: int = Field(description="The model's context length it was measured against.")


class FileRestore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    path: str
    action: Literal["restored", "deleted", "refused", "skipped"]
    reason: str = ""
    sha256_before: str | None = Field(default=None, description="What the file held before "
                                      "(its content is kept, so a redo can put it back).")
    sha256_after: str | None = Field(default=None, description="What it holds now (None: deleted).")
    mode: int | None = Field(default=None, description="Its mode before; a redo recreates a "
                             "deleted file with it.")


class UndoApplied(_Base):
    """An undo (or a redo of the last undo): which files went back, which were refused and why.

    Undos in effect form a stack folded from these events (appliance.sessions):
    an undo with nothing refused pushes, a redo with nothing refused pops.
    """

    type: Literal["undo_applied"] = "undo_applied"
    kind: Literal["undo", "redo"] = "undo"
    requested_by: str = Field(description="rpc, cli, tui.")
    after_turn: int | None = Field(default=None, description="Undo every turn after this one; None: the last.")
    run_ids: list[str] = Field(default_factory=list)
    files: list[FileRestore] = Field(default_factory=list)
    bash_calls_not_undone: int = Field(default=0, description="bash calls in those runs; their effects stay.")


class TaskStarted(_Base):
    """A ``task`` call spawned a subagent: its session, profile and reserved budget."""

    type: Literal["task_started"] = "task_started"
    call_id: str
    child_session_id: str
    agent_type: str
    description: str
    reserved: dict[str, float] = Field(default_factory=dict,
                                       description="turns, tokens, deadline_s reserved from the parent.")


class TaskEnded(_Base):
    """The subagent ended; what the harness measured (not what the child said)."""

    type: Literal["task_ended"] = "task_ended"
    call_id: str
    child_session_id: str
    status: str = Field(description="The child's run end reason: done, max_turns, budget, interrupted ...")
    files_changed: list[str] = Field(default_factory=list)
    commands: list[dict[str, Any]] = Field(default_factory=list, description="bash commands and exit codes.")
    spent: dict[str, float] = Field(default_factory=dict)


# -- policy and extensions: every decision, with what made it -----------------


class PolicyDecision(_Base):
    """What policy decided about one call, before any approval; ``decided_by`` names the source.

    ``decided_by`` is a rule (``deny[2]``, ``allow[0]``, ``session-allow[1]``),
    a pattern (``destructive``, ``unparseable``), ``capability``,
    ``mode:plan|ask|auto``, or ``extension:NAME`` (several joined by commas).
    """

    type: Literal["policy_decision"] = "policy_decision"
    call_id: str
    tool: str
    verdict: Literal["allow", "ask", "deny"]
    decided_by: str
    reason: str
    args: Any = Field(description="The normalized arguments the decision was made on.")
    commands: list[str] = Field(default_factory=list, description="bash commands needing an answer.")
    basis_digest: str = Field(default="", description="sha256 of the decision_basis in force: "
                              "the rules, mode, extensions, MCP pins and tool schemas this "
                              "decision was made under (empty in logs from before it existed).")


class DecisionBasis(_Base):
    """A copy of everything that decides calls, recorded when a session's tooling starts.

    Each ``policy_decision`` names it by ``digest``, so an auditor can replay
    why a call was allowed or refused after ``config.json`` has changed:
    ``deny[2]`` means ``policy.deny[2]`` of this copy.  Recorded once per
    session, and again only when a resumed session starts under a different one.
    """

    type: Literal["decision_basis"] = "decision_basis"
    digest: str = Field(description="sha256 of the canonical JSON of the other fields.")
    policy: dict[str, Any] = Field(description="The effective policy: mode, deny, ask, allow, capabilities.")
    extensions: list[dict[str, Any]] = Field(default_factory=list,
                                             description="name, command, args, events (env: names only).")
    mcp_pins: dict[str, str | None] = Field(default_factory=dict,
                                            description="MCP server -> reviewed tools_sha256.")
    tools: dict[str, Any] = Field(default_factory=dict, description="Tool name -> schema offered.")


class PolicyRuleAdded(_Base):
    """An approver answered "always allow": the scoped rule that was stored for this session."""

    type: Literal["policy_rule_added"] = "policy_rule_added"
    call_id: str
    rule_id: str
    rule: dict[str, Any]
    added_by: str


class ExtensionLog(_Base):
    """A line an extension asked to log, or a reply field Abhed ignored (e.g. an attempt to allow)."""

    type: Literal["extension_log"] = "extension_log"
    extension: str
    event: str
    kind: Literal["log", "ignored"]
    message: str


class ExtensionDied(_Base):
    """An extension crashed, hung or talked nonsense; it is skipped for the rest of the session."""

    type: Literal["extension_died"] = "extension_died"
    extension: str
    event: str = Field(description="The event it was handling when it died.")
    reason: str


# -- the log's own events: rotation, repair, retention -------------------------

LOG_SESSION = "log"
"""The ``session_id`` of events about the log itself (no session is named "log")."""


class SegmentStarted(_Base):
    """The first event of a segment opened by rotation: it names the segment it continues."""

    type: Literal["segment_started"] = "segment_started"
    segment: int
    previous_segment: str = Field(description="File name of the segment sealed before this one.")
    previous_head_seq: int
    previous_head_hash: str
    reason: str = Field(description="size, age, repair or operator.")


class LogRepaired(_Base):
    """``abhed events repair`` salvaged a damaged log: what was kept, what was lost, where the evidence is."""

    type: Literal["log_repaired"] = "log_repaired"
    damaged_file: str = Field(description="Where the damaged file was kept, untouched.")
    damaged_sha256: str
    damage: str = Field(description="What verify found wrong.")
    last_good_seq: int
    last_good_hash: str
    highest_seq_seen: int = Field(description="The highest event number still readable in the damaged file.")
    highest_hash_seen: str
    lost_events: int = Field(description="Events after last_good_seq that could not be kept in the chain.")
    method: str = Field(description="How rows were read back: sql, rowid or sqlite-recover.")


class SegmentDeleted(_Base):
    """A sealed segment was deleted by retention; its range and head stay on the record."""

    type: Literal["segment_deleted"] = "segment_deleted"
    segment: str
    first_seq: int
    last_seq: int
    head_hash: str
    sha256: str
    deleted_by: str


class ForwardingChanged(_Base):
    """Live forwarding to syslog or journald stopped, came back, or never came back.

    One event when an outage starts (at most one a minute per process, so a
    collector that flaps or stays down for hours makes no storm), one when it
    ends, with what the SIEM missed: events sent late from the backlog, and
    events it never got (the backlog is bounded), by ``seq`` so they can be
    exported (``abhed events export --format ocsf --since``).
    """

    type: Literal["forwarding"] = "forwarding"
    destination: str = Field(description="syslog:/dev/log, journald:/run/systemd/journal/socket ...")
    state: Literal["interrupted", "restored", "unrecovered"] = Field(
        description="interrupted: sends fail; restored: they work again; unrecovered: the process "
                    "closed the log while they still failed.")
    error: str = Field(default="", description="Why the first send of the outage failed.")
    since: str = Field(default="", description="When the outage began (UTC, ISO 8601).")
    outages: int = Field(default=1, description="Outages folded into this record (rate limit).")
    missed: int = Field(default=0, description="Events that could not be sent when appended.")
    replayed: int = Field(default=0, description="Of those, sent late from the backlog.")
    lost: int = Field(default=0, description="Of those, never sent (backlog full, or unrecovered).")
    first_missed_seq: int | None = None
    last_missed_seq: int | None = None


Event = Annotated[
    SessionStarted | ActionEvent | ObservationEvent | SessionEnded | StartupNotice
    | RunStarted | UserMessage | ModelTurn | ApprovalEvent | RunEnded
    | PolicyDecision | PolicyRuleAdded | ExtensionLog | ExtensionDied
    | TodoUpdated | PlanUpdated | Compacted | UndoApplied | TaskStarted | TaskEnded
    | SegmentStarted | LogRepaired | SegmentDeleted | DecisionBasis | ForwardingChanged,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))

EVENT_CLASSES: tuple[type[BaseModel], ...] = get_args(get_args(Event)[0])
"""Every event class, derived from the union: the one roster (tests hold each renderer and
the OCSF mapping to it, so a new event cannot be forgotten by one of them)."""


def migrate(raw: dict[str, Any]) -> dict[str, Any]:
    """Upgrade a stored event body to the current schema version.

    Version 1 is the first; each later version adds one step here, so an
    old log stays readable forever (the stored bytes, and so the hash chain,
    are never rewritten).  1 -> 2 and 2 -> 3 need no step: they only
    added optional fields (ModelTurn's ``request_id`` and ``retries``, SessionStarted's
    ``host`` and ``account``, RunEnded's ``retries``) and a RunEnded reason.
    """
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(f"unsupported event schema_version {version!r}")
    return raw
