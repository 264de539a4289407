"""Walking the hash chain: one checker for the store, segments, repair and exports."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from appliance._errors import ChainBroken
from appliance.events._models import EVENT_ADAPTER, migrate
from appliance.events._schema import GENESIS, Row, chain_hash
from foundation import link_problem

__all__ = ["ChainWalker"]


@dataclass
class ChainWalker:
    """Feeds rows in order and raises :class:`ChainBroken` at the first that does not fit.

    It starts from a base (``seq`` and ``hash`` of the event before the first
    one fed: 0 and the genesis hash for a log's first segment, the previous
    segment's head for a later one) and per-session counters carried over.
    """

    seq: int = 0
    head: str = GENESIS
    per_session: dict[str, int] = field(default_factory=dict)
    count: int = 0
    check_bodies: bool = True
    # An export may start mid-session: the first event seen of a session sets its counter.
    sessions_from_first_seen: bool = False

    def feed(self, row: Row) -> None:
        problem = link_problem(
            expected_seq=self.seq + 1, head=self.head, seq=row.seq, prev_hash=row.prev_hash,
            stored_hash=row.hash, noun="event",
            computed_hash=lambda: chain_hash(row.seq, row.session_id, row.session_seq, row.type,
                                             row.ts, row.body, row.prev_hash))
        if problem is not None:
            raise ChainBroken(*problem)
        want = self.per_session.get(row.session_id, 0) + 1
        if self.sessions_from_first_seen and row.session_id not in self.per_session:
            want = row.session_seq
        if row.session_seq != want:
            raise ChainBroken(row.seq, f"session {row.session_id} order broken (expected "
                                       f"#{want}, found #{row.session_seq})")
        if self.check_bodies:
            try:
                parsed = json.loads(row.body)
                EVENT_ADAPTER.validate_python(migrate(parsed))
            except (ValueError, TypeError, AttributeError) as exc:
                raise ChainBroken(row.seq, f"its body is not a valid event ({exc})") from None
            if (parsed.get("session_id") != row.session_id or parsed.get("type") != row.type
                    or parsed.get("ts") != row.ts):
                raise ChainBroken(row.seq, "its columns disagree with its body: altered")
        self.per_session[row.session_id] = row.session_seq
        self.seq = row.seq
        self.head = row.hash
        self.count += 1

    def skip(self, seq: int, prev_hash: str, digest: str) -> None:
        """A withheld event (a filtered export): its link is checked, its hash taken as given."""
        if seq != self.seq + 1:
            raise ChainBroken(self.seq + 1, f"missing (the next exported event is {seq})")
        if prev_hash != self.head:
            raise ChainBroken(seq, "its prev_hash does not match the event before it")
        self.seq, self.head = seq, digest
