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
import threading
from typing import cast

from acp import Agent, run_agent

from appliance.compose import Config
from appliance.events import EventStore
from cli.acp._agent import AbhedAgent
from cli.acp._transport import MAX_LINE_BYTES, LineTransport

__all__ = ["run", "serve"]


def _feed(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int) -> None:
    """On a thread: what arrives on ``fd`` into ``reader``, then its end.

    A thread and plain reads, not the loop's pipe transport, so stdin may be
    anything a client hands over: a pipe, a socket, a terminal, a file.
    """
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            loop.call_soon_threadsafe(reader.feed_data, chunk)
    finally:
        try:
            loop.call_soon_threadsafe(reader.feed_eof)
        except RuntimeError:  # the loop has ended
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def run(agent: AbhedAgent, in_fd: int, out_fd: int, *, signals: bool = True) -> None:
    """Serve ``agent`` on the two descriptors until the client leaves (or a signal comes)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    feeder = threading.Thread(target=_feed, args=(loop, reader, in_fd), name="abhed-acp-stdin",
                              daemon=True)
    feeder.start()

    async def write(data: bytes) -> None:
        # On a thread: a client slow to read blocks that thread, never the loop.
        await asyncio.to_thread(_write_all, out_fd, data)

    redactor = agent.store.redactor
    transport = LineTransport(reader, write, redact=redactor.value if redactor else None)
    # The SDK routes what AbhedAgent defines; a method it leaves out (authenticate, fork ...)
    # is answered "method not found", so the full Agent protocol is not needed.
    listen = asyncio.ensure_future(run_agent(cast(Agent, agent), transport))
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
        os.close(out_fd)  # the client reads its end of the connection
        if not feeder.is_alive():
            os.close(in_fd)


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
