"""Real collectors the forwarding tests send to: rsyslog and journald, each on its own socket.

rsyslog (the Debian package) runs in the foreground with a configuration of
its own: an imuxsock input on the test's socket with RFC 5424 parsing
(``UseSpecialParser="off"``), ``mmpstrucdata`` (rsyslog's parser of RFC 5424
structured data) and ``mmjsonparse`` (the message as JSON), writing one JSON
line per message with the header as rsyslog parsed it.  journald runs as a
namespace instance (``systemd-journald NAMESPACE``, its sockets under
``/run/systemd/journal.NAMESPACE/``) and is read back with ``journalctl
--namespace``: systemd's own parser of its native protocol.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import wait_for

RSYSLOG_CONF = """\
global(workDirectory="{dir}" maxMessageSize="64k")
module(load="imuxsock" SysSock.Use="off")
module(load="mmpstrucdata")
module(load="mmjsonparse")
input(type="imuxsock" Socket="{sock}" UseSpecialParser="off" ParseHostname="on"
      IgnoreTimestamp="off" UsePIDFromSystem="off")
template(name="parsed" type="list" option.jsonf="on") {{
  property(outname="protocol" name="protocol-version" format="jsonf")
  property(outname="pri" name="pri" format="jsonf")
  property(outname="time" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="host" name="hostname" format="jsonf")
  property(outname="app" name="app-name" format="jsonf")
  property(outname="procid" name="procid" format="jsonf")
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="sd" name="structured-data" format="jsonf")
  property(outname="parsed" name="$!" format="jsonf")
}}
action(type="mmpstrucdata")
action(type="mmjsonparse" cookie="" container="!ocsf")
action(type="omfile" file="{out}" template="parsed")
"""


class Rsyslog:
    """A real rsyslogd on ``dir/log.sock``, writing what it parsed to ``dir/received.jsonl``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.sock = directory / "log.sock"
        self.out = directory / "received.jsonl"
        self.conf = directory / "rsyslog.conf"
        self.conf.write_text(RSYSLOG_CONF.format(dir=directory, sock=self.sock, out=self.out))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Rsyslog:
        with open(self.dir / "rsyslogd.err", "ab") as err:
            self.proc = subprocess.Popen(
                ["rsyslogd", "-n", "-f", str(self.conf), "-i", str(self.dir / "rsyslogd.pid")],
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        wait_for(self.sock.exists, 30, what="rsyslogd's socket")
        return self

    def stop(self) -> None:
        """SIGTERM and wait: rsyslogd removes its socket, as a stopped service does."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.proc = None

    def received(self) -> list[dict[str, Any]]:
        """Every message rsyslog wrote, with its structured data and MSG as rsyslog parsed them."""
        if not self.out.exists():
            return []
        lines = []
        for line in self.out.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            entry["parsed"] = json.loads(entry["parsed"])
            lines.append(entry)
        return lines


class Journald:
    """A real systemd-journald namespace instance; ``entries()`` reads it with journalctl."""

    def __init__(self) -> None:
        self.namespace = "abhedtest" + secrets.token_hex(4)
        self.run_dir = Path(f"/run/systemd/journal.{self.namespace}")
        self.sock = self.run_dir / "socket"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Journald:
        self.proc = subprocess.Popen(["/lib/systemd/systemd-journald", self.namespace],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        wait_for(self.sock.exists, 30, what="journald's socket")
        return self

    def entries(self, identifier: str) -> list[dict[str, Any]]:
        done = subprocess.run(["journalctl", f"--namespace={self.namespace}", "-o", "json",
                               "--no-pager", f"SYSLOG_IDENTIFIER={identifier}"],
                              capture_output=True, text=True, check=False, timeout=60)
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.proc = None
        shutil.rmtree(self.run_dir, ignore_errors=True)
        machine = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() \
            else ""
        for base in (Path("/var/log/journal"), Path("/run/log/journal")):
            shutil.rmtree(base / f"{machine}.{self.namespace}", ignore_errors=True)
