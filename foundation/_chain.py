"""The hash-chain rule shared by every tamper-evident log Abhed keeps.

Two logs are chained: the agent's event log (``appliance.events``) and the
model service's request record (``models``).  Both link a row to the one
before it the same way, so an auditor learns one rule and one set of
findings.  ``models`` cannot import ``appliance``, so the rule lives here,
on the floor both stand on.

The rule: ``hash = sha256(canonical JSON header + "\\n" + body)``, where the
header holds the row's position and its ``prev_hash`` (the previous row's
hash, :data:`GENESIS` for the first), and the body is hashed as the exact text
stored, so verification needs no re-serialisation and cannot be fooled by
one.  The header is JSON, so no field can smuggle a separator.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["GENESIS", "canonical", "link_hash", "link_problem"]

GENESIS = "0" * 64


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: one text per value, for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def link_hash(header: Sequence[Any], body: str) -> str:
    """The hash of one row: its header (position, identity, ``prev_hash`` last) then its body."""
    digest = hashlib.sha256(canonical(list(header)).encode("utf-8", "surrogatepass"))
    digest.update(b"\n")
    digest.update(body.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def link_problem(*, expected_seq: int, head: str, seq: int, prev_hash: str, stored_hash: str,
                 computed_hash: Callable[[], str], noun: str = "record") -> tuple[int, str] | None:
    """Whether a row fits after ``head``: None, or (the seq at fault, what is wrong).

    ``expected_seq`` is one past the last row accepted; ``computed_hash`` computes
    :func:`link_hash` over the row as stored, called only once the row's position and
    link fit: a torn row (a damaged page read back as NULLs) is named by its position,
    never hashed.  The sentences are the ones an
    auditor sees from either log, naming its rows (``noun``: "event", "record").
    """
    if seq != expected_seq:
        if seq > expected_seq:
            return expected_seq, f"missing (the next stored {noun} is {seq}): deleted"
        return seq, f"out of order (expected {expected_seq}): inserted or reordered"
    if prev_hash != head:
        return seq, (f"its prev_hash does not match the {noun} before it: "
                     f"{'an' if noun[0] in 'aeiou' else 'a'} {noun} was removed, inserted or reordered")
    if computed_hash() != stored_hash:
        return seq, "its contents do not match its hash: altered"
    return None
