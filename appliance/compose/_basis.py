"""What decides a session's calls, as one recordable copy with a digest.

Built where the tooling starts (the tools offered are known only once the
extensions and MCP servers have answered), recorded as a ``decision_basis``
event, and named by digest in every ``policy_decision``: a decision that says
``deny[2]`` can be resolved against the rules that were in force, long after
``config.json`` has changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from appliance._session import Session
from appliance.events import DecisionBasis
from appliance.extensions import ExtensionSpec
from appliance.mcp import McpServerSpec
from appliance.policy import PolicySettings

__all__ = ["decision_basis", "record_basis"]


def _spec(spec: ExtensionSpec | McpServerSpec) -> dict[str, Any]:
    # env values may be credentials: the names say what was set, the values stay out.
    data = spec.model_dump(mode="json")
    if isinstance(data.get("env"), dict):
        data["env"] = sorted(data["env"])
    return data


def decision_basis(session_id: str, policy: PolicySettings, extensions: Sequence[ExtensionSpec],
                   mcp_servers: Sequence[McpServerSpec], tools: Mapping[str, Any]) -> DecisionBasis:
    offered: dict[str, Any] = {}
    for name in sorted(tools):
        try:
            offered[name] = tools[name].spec()
        except (AttributeError, TypeError, ValueError):
            offered[name] = None
    copy: dict[str, Any] = {
        "policy": policy.model_dump(mode="json"),
        "extensions": [_spec(e) for e in extensions],
        "mcp_pins": {m.name: m.tools_sha256 for m in mcp_servers},
        "tools": offered,
    }
    text = json.dumps(copy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return DecisionBasis(session_id=session_id, digest=digest, **copy)


def record_basis(session: Session, basis: DecisionBasis) -> None:
    """Append ``basis`` unless the session's latest recorded basis is the same one."""
    latest = ""
    for stored in session.store.events(session.id, types=("decision_basis",)):
        latest = getattr(stored.event, "digest", "")
    if latest != basis.digest:
        session.append(basis)
