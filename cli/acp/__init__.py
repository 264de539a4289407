"""``abhed acp``: Abhed as an Agent Client Protocol agent, for the engineer's editor.

JSON-RPC over stdio on the protocol's maintained Python SDK
(``agent-client-protocol``); every session is built by the one assembly
(``appliance.compose.start_agent``, door ``acp``) and governed like the
TUI's and ``abhed rpc``'s.  docs/acp.md is the reference.

Public surface: the click command :data:`acp` (the SDK is imported only
when it runs, so ``abhed --help`` never loads it).
"""

from __future__ import annotations

from cli.acp._command import acp

__all__ = ["acp"]
