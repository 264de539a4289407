"""One extension process: write a request line, read exactly one reply, or declare it dead.

A reader thread moves stdout lines into a queue so a reply can be awaited
with a deadline; stderr is drained into a small ring so a dying extension's
last words reach the event log without ever blocking it.  A reply may span
several lines (the specification's own ``list_tools`` example does), so lines
are joined until they form one complete JSON value.  Anything else (invalid
UTF-8, an oversized or unparseable reply, a second reply, silence past
``timeout_ms``, exit) kills the process and marks it dead for the session.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from typing import IO, Any

from appliance.extensions._settings import ExtensionSpec
from foundation import terminate_group

__all__ = ["MAX_REPLY_BYTES", "ExtensionProcess"]

MAX_REPLY_BYTES = 1 << 20
_STDERR_KEEP = 2048
_EOF = b""


class ExtensionProcess:
    """A running extension, or a dead one with the reason it died."""

    def __init__(self, spec: ExtensionSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.dead: str | None = None
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._stderr_stream: IO[bytes] | None = None
        self._stderr = bytearray()
        env = {**os.environ, **spec.env}
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [spec.command, *spec.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env, start_new_session=True)
        except OSError as exc:
            self._proc = None
            self.dead = f"could not start {spec.command!r}: {exc.strerror or exc}"
            return
        self._stderr_stream = self._proc.stderr
        assert self._proc.stdout is not None
        threading.Thread(target=self._read_stdout, args=(self._proc.stdout,), daemon=True,
                         name=f"ext-{self.name}-out").start()
        threading.Thread(target=self._read_stderr, daemon=True,
                         name=f"ext-{self.name}-err").start()

    # -- background readers ------------------------------------------------
    def _read_stdout(self, out: IO[bytes]) -> None:
        while True:
            try:
                line = out.readline(MAX_REPLY_BYTES + 1)
            except (OSError, ValueError):  # closed under us by kill()
                line = _EOF
            self._lines.put(line)
            if not line or (len(line) > MAX_REPLY_BYTES and not line.endswith(b"\n")):
                out.close()  # the reader owns its stream: closing it elsewhere races the read
                return

    def _read_stderr(self) -> None:
        assert self._stderr_stream is not None
        fd = self._stderr_stream.fileno()
        try:
            while chunk := os.read(fd, 4096):
                self._stderr.extend(chunk)
                del self._stderr[:-_STDERR_KEEP]
        except OSError:
            pass
        self._proc_stderr_close()

    def _proc_stderr_close(self) -> None:
        if self._stderr_stream is not None:
            self._stderr_stream.close()

    # -- the exchange ------------------------------------------------------
    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send one request and return its reply object; ``None`` if the extension died."""
        if self.dead is not None or self._proc is None:
            return None
        if not self._lines.empty():
            self.kill("wrote output nobody asked for (it answered a request more than once, or "
                      "wrote without being asked), so later replies could not be matched")
            return None
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except OSError:
            self.kill(self._exit_reason("stopped reading its input"))
            return None
        return self._reply(time.monotonic() + self.spec.timeout_ms / 1000)

    def _reply(self, deadline: float) -> dict[str, Any] | None:
        buf = b""
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill(f"did not answer within timeout_ms={self.spec.timeout_ms} (hung); it is "
                          "not retried, since a late reply would be matched to the wrong request")
                return None
            if line == _EOF:
                self.kill(self._exit_reason("exited without replying"))
                return None
            buf += line
            if len(buf) > MAX_REPLY_BYTES:
                self.kill(f"wrote a reply larger than {MAX_REPLY_BYTES} bytes (flooding)")
                return None
            try:
                text = buf.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.kill(f"wrote invalid UTF-8 (byte {exc.start} of its reply)")
                return None
            if not text.strip():
                buf = b""
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                if exc.pos >= len(text.rstrip()):
                    continue  # an object still being written across lines
                self.kill(f"wrote something that is not JSON: {text.strip()[:120]!r}")
                return None
            if not isinstance(value, dict):
                self.kill(f"replied with a JSON {type(value).__name__}, not an object: "
                          f"{text.strip()[:120]!r}")
                return None
            return value

    def _exit_reason(self, what: str) -> str:
        code = self._proc.poll() if self._proc is not None else None
        if code is None and self._proc is not None:
            try:
                code = self._proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                code = None
        tail = bytes(self._stderr).decode("utf-8", "replace").strip()[-300:]
        status = f" (exit code {code})" if code is not None else ""
        return f"{what}{status}" + (f"; its last error output: {tail!r}" if tail else "")

    def kill(self, reason: str) -> None:
        """Mark dead and end the whole process group; never raises."""
        if self.dead is None:
            self.dead = reason
        self.close()

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        terminate_group(proc, grace_s=0)  # it misbehaved or is done: no grace
