"""Run :class:`cli.acp._agent.AbhedAgent` on the process's stdin and stdout until the client leaves.

stdout belongs to the protocol: the real descriptor is kept for it and
descriptor 1 is pointed at stderr, so nothing else (a stray print, a child
process that inherits it) can put a byte among the JSON-RPC lines.  When the
client closes its end, or SIGTERM or SIGINT arrives, every turn is
interrupted and recorded as ended, and every session is closed, before the
process exits 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from asyncio.streams import FlowControlMixin
from typing import cast

from acp import Agent, run_agent

from appliance.compose import Config
from appliance.events import EventStore
from cli.acp._agent import AbhedAgent
from cli.acp._transport import MAX_LINE_BYTES, LineTransport

__all__ = ["run", "serve"]


async def _streams(in_fd: int, out_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(in_fd, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(FlowControlMixin,
                                                        os.fdopen(out_fd, "wb", buffering=0))
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def run(agent: AbhedAgent, in_fd: int, out_fd: int, *, signals: bool = True) -> None:
    """Serve ``agent`` on the two descriptors until the client leaves (or a signal comes)."""
    reader, writer = await _streams(in_fd, out_fd)
    redactor = agent.store.redactor
    transport = LineTransport(reader, writer, redact=redactor.value if redactor else None)
    # The SDK routes what AbhedAgent defines; a method it leaves out (authenticate, fork ...)
    # is answered "method not found", so the full Agent protocol is not needed.
    listen = asyncio.ensure_future(run_agent(cast(Agent, agent), transport))
    loop = asyncio.get_running_loop()
    why = ["the ACP client closed the connection"]

    def stop(name: str) -> None:
        why[0] = f"abhed acp got {name}"
        listen.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT) if signals else ():
        loop.add_signal_handler(sig, stop, sig.name)
    try:
        await listen
    except asyncio.CancelledError:
        pass
    finally:
        await agent.close(why[0])


def serve(config: Config, store: EventStore, *, provider: str | None = None,
          model: str | None = None, force_tool: str | None = None) -> int:
    """Serve ACP on stdin/stdout; 0 when the client has gone and everything is recorded."""
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    in_fd = os.dup(0)
    agent = AbhedAgent(config, store, provider=provider, model=model, force_tool=force_tool)
    asyncio.run(run(agent, in_fd, out_fd))
    return 0
