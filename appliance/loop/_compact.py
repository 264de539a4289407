"""Context budget: count tokens before sending, and compact when a request would not fit.

Accounting: the server's ``usage`` after each reply calibrates a local
estimate (prompt tokens per character of the request's JSON), so the size
of the *next* request is known before it is sent.  The context length comes
from the model catalog (or ``loop.context_tokens``).

Compaction, when a request would pass ``loop.compact_at`` of the context
(default 0.6: small local models degrade early):

1. **Mask** old tool outputs first (cheap, and as good as summaries on
   SWE-bench in "The Complexity Trap"): whole batches (every result of one
   model turn), oldest first, never the last ``keep_turns`` turns; each
   becomes a one-line stub naming the artifact that keeps its full text.
2. Only if still over, **summarise** everything before the kept tail with
   the model: a structured summary (task, decisions, files touched, open
   questions); the person's messages stay verbatim beside it.
3. The fold then puts the open todo list and the plan back.

A circuit breaker stops it looping (opencode#15533, codex#31351): after 3
failed compactions, or one that saved under 10%, no more are tried and a
request that still does not fit ends the run with ``context_full``.  A
compaction never starts a turn by itself: it happens only before a request
the run was about to send anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from appliance.events import Compacted
from appliance.loop._history import History
from models import ChatRequest, ProviderError

if TYPE_CHECKING:
    from models import Provider
    from tools import ArtifactKeeper

__all__ = ["Compactor", "SUMMARY_MAX_CHARS", "estimate_tokens"]

SUMMARY_MAX_CHARS = 8000
_DEFAULT_CHARS_PER_TOKEN = 3.5
_SUMMARY_PROMPT = """\
Summarise the conversation above for another model that will continue the work with only
your summary, the user's messages and the most recent turns. Write these sections:
Task: what the user asked, in one or two sentences.
Decisions: what was decided and why.
Files: every file read or changed, with what was done to it.
State: what is done, what is in progress, what failed (quote error messages briefly).
Open questions: what is unknown or blocked.
Be factual and brief; do not call tools."""


def _chars(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(tools, ensure_ascii=False))


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                    chars_per_token: float = _DEFAULT_CHARS_PER_TOKEN) -> int:
    """A request's prompt tokens, estimated from its JSON size."""
    return int(_chars(messages, tools) / max(0.5, chars_per_token)) + 1


@dataclass
class _Outcome:
    event: Compacted | None
    message: str


class Compactor:
    """Decides when to compact one agent's conversation and does it; holds the circuit breaker."""

    def __init__(self, context_tokens: int | None, *, compact_at: float = 0.6, target: float = 0.45,
                 keep_turns: int = 2, max_failures: int = 3, min_saving: float = 0.10) -> None:
        self.context_tokens = context_tokens
        self.compact_at = compact_at
        self.target = target
        self.keep_turns = keep_turns
        self.max_failures = max_failures
        self.min_saving = min_saving
        self.failures = 0
        self.tripped: str | None = None  # why compaction stopped being tried
        self.chars_per_token = _DEFAULT_CHARS_PER_TOKEN

    # -- accounting -------------------------------------------------------------
    def calibrate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                  prompt_tokens: int) -> None:
        """Learn chars per token from the server's count for a request just sent."""
        if prompt_tokens > 0:
            self.chars_per_token = _chars(messages, tools) / prompt_tokens

    def estimate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return estimate_tokens(messages, tools, self.chars_per_token)

    def over(self, tokens: int) -> bool:
        return self.context_tokens is not None and tokens > self.compact_at * self.context_tokens

    # -- compaction ---------------------------------------------------------------
    def compact(self, history: History, tools: list[dict[str, Any]], *, provider: Provider,
                artifacts: ArtifactKeeper | None, session_id: str, run_id: str,
                trigger: Literal["auto", "manual"]) -> _Outcome:
        """Mask, then summarise if still needed; returns the event to record (None: nothing done)."""
        if self.tripped is not None and trigger == "auto":
            return _Outcome(None, self.tripped)
        before = self.estimate(history.outgoing(), tools)
        context = self.context_tokens or before * 2
        goal = int(self.target * context) if trigger == "auto" else int(before * 0.5)
        masked: list[str] = []
        tokens = before
        per_char = 1 / max(0.5, self.chars_per_token)
        for batch in history.mask_batches(self.keep_turns):
            if tokens <= goal:
                break
            for call_id, _tool, raw in batch:
                if artifacts is not None:
                    artifacts.keep(raw.encode("utf-8", "replace"), kind="output")
                masked.append(call_id)
                tokens -= int(len(raw) * per_char) - 40
        strategy: Literal["mask", "summary"] = "mask"
        summary, through = "", None
        if tokens > goal:
            cut = history.summary_cut(self.keep_turns)
            if cut is not None:
                through, covered = cut
                try:
                    summary = self._summarise(provider, covered)
                    strategy = "summary"
                except ProviderError as exc:
                    if not masked:
                        return self._fail(f"the summary request failed ({exc})")
        if not masked and strategy == "mask":
            return self._fail("nothing old enough to mask or summarise")
        event = Compacted(session_id=session_id, run_id=run_id, trigger=trigger, strategy=strategy,
                          masked_call_ids=masked,
                          summarised_through_seq=through if strategy == "summary" else None,
                          summary=summary, tokens_before=before, tokens_after=0,
                          context_tokens=self.context_tokens or 0)
        return _Outcome(event, "")

    def measured(self, event: Compacted, after: int) -> tuple[Compacted, str | None]:
        """The event with its real ``tokens_after``; trips the breaker when it saved too little."""
        event = event.model_copy(update={"tokens_after": after})
        saving = 1 - after / event.tokens_before if event.tokens_before else 0.0
        if saving < self.min_saving:
            self.tripped = (f"compaction saved only {saving:.0%} ({event.tokens_before} -> {after} "
                            "tokens); no more compaction will be tried in this run")
            return event, self.tripped
        self.failures = 0
        return event, None

    def _fail(self, why: str) -> _Outcome:
        self.failures += 1
        if self.failures >= self.max_failures:
            self.tripped = f"compaction failed {self.failures} times (last: {why}); stopped trying"
        return _Outcome(None, why)

    @staticmethod
    def _summarise(provider: Provider, covered: list[dict[str, Any]]) -> str:
        messages = [{"role": "system", "content": "You write handoff summaries of coding sessions."},
                    {"role": "user", "content": "The conversation:\n" + json.dumps(
                        covered, ensure_ascii=False)[-400_000:] + "\n\n" + _SUMMARY_PROMPT}]
        reply = provider.complete(ChatRequest(messages=messages, tools=[], tool_choice=None,
                                              sampling={"max_tokens": 2048}, stream=True))
        text = (reply.text or "").strip()
        if not text:
            raise ProviderError("the model returned an empty summary")
        if len(text) > SUMMARY_MAX_CHARS:
            text = text[:SUMMARY_MAX_CHARS] + "\n[summary cut at its bound]"
        return text
