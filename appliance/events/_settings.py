"""The operator's settings for the event log (``config.json`` → ``events``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["EventLogSettings", "ForwardSettings", "FACILITIES"]

# RFC 5424 section 6.2.1: the facility names syslog(3) knows, and their numbers.
FACILITIES = {"kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6,
              "news": 7, "uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11,
              **{f"local{i}": 16 + i for i in range(8)}}
Facility = Literal["kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp",
                   "cron", "authpriv", "ftp", "local0", "local1", "local2", "local3", "local4",
                   "local5", "local6", "local7"]


class ForwardSettings(BaseModel):
    """``events.forward``: each event also goes to the host's syslog or journald as it is appended.

    The local record comes first and never waits on the collector: a send
    that fails is kept for a later retry, and the failure is itself recorded
    (docs/event-log.md, "Live forwarding").
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    to: Literal["syslog", "journald"] = Field(
        description="syslog: RFC 5424 with structured data over a local datagram socket; "
                    "journald: systemd's native protocol over its socket.")
    socket: str | None = Field(
        default=None, min_length=2, max_length=107,
        description="The socket's absolute path; default /dev/log (syslog) or "
                    "/run/systemd/journal/socket (journald).")
    facility: Facility = Field(
        default="authpriv",
        description="Syslog facility: authpriv (security messages, readable by root only on "
                    "Debian) because records hold commands, paths and prompts.")
    app_name: str = Field(default="abhed", pattern=r"^[!-~]{1,48}$",
                          description="RFC 5424 APP-NAME / journald SYSLOG_IDENTIFIER.")
    sd_id: str = Field(
        default="abhed@32473", pattern=r"^[!-~]{3,32}$",
        description="The structured-data element's name: NAME@ENTERPRISE-NUMBER. 32473 is the "
                    "number RFC 5612 reserves for examples; a site with its own IANA "
                    "enterprise number puts it here.")
    max_message_bytes: int = Field(
        default=8192, ge=1024, le=1 << 20,
        description="The most one message may take (rsyslog's default maxMessageSize is 8k): "
                    "longer values in a record are cut (metadata.is_truncated) to fit.")

    @field_validator("socket")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"socket must be an absolute path, not {value!r}")
        return value

    @field_validator("sd_id")
    @classmethod
    def _sd_name(cls, value: str) -> str:
        name, at, number = value.partition("@")
        if not (name and at and number.isdigit()) or any(c in value for c in '= ]"'):
            raise ValueError(f"sd_id must be NAME@ENTERPRISE-NUMBER (e.g. abhed@32473), "
                             f"not {value!r}")
        return value

    @property
    def path(self) -> str:
        """The socket used: the configured one, else the system default for ``to``."""
        return self.socket or ("/dev/log" if self.to == "syslog" else "/run/systemd/journal/socket")


class EventLogSettings(BaseModel):
    """Disk reserve and rotation; retention is a separate, recorded act (``abhed events prune``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reserve_mb: int = Field(
        default=64, ge=0,
        description="Free space (MiB) that must remain on the log's file system for a new run, "
                    "rpc server or tool call to start (auditd's space_left). 0: no reserve.")
    rotate_mb: int = Field(
        default=64, ge=0,
        description="Seal the active segment and start a new one once it reaches this size "
                    "(MiB). 0: never by size.")
    redact: tuple[str, ...] = Field(
        default=(), max_length=1000,
        description="Regular expressions (Python syntax) replaced by [redacted] in every event "
                    "before it is written: arguments, results, details, error text, the model's "
                    "text. Applied to the rpc stream and exports too, since both come from the log.")
    witness_dir: str | None = Field(
        default=None,
        description="A shared host's head witness (docs/event-log.md, 'A shared host'): each "
                    "store posts its head to WITNESS/inbox when it closes after appending, and "
                    "new work is refused while the inbox cannot take one.")
    rotate_days: int = Field(
        default=0, ge=0,
        description="Seal the active segment once it is this many days old. 0: never by age.")
    forward: ForwardSettings | None = Field(
        default=None,
        description="Also send each event, as it is appended, to the host's syslog or journald "
                    "(the site's SIEM reads it from there). None: the log only.")

    @field_validator("redact")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for p in patterns:
            if not p or len(p) > 10_000:
                raise ValueError("each redact pattern must be 1 to 10000 characters")
            try:
                if re.compile(p).match(""):
                    raise ValueError(f"redact pattern {p!r} matches the empty string")
            except re.error as exc:
                raise ValueError(f"redact pattern {p!r} is not a regular expression: {exc}") from None
        return patterns
