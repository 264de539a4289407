"""An agent host's gate takes the engineers' path: through the new release's model relay.

Engineers on an agent host reach the site's model service through the host's relay
(``abhed model-relay``, root, docs/model-service.md), named by the socket their
provider gives (``unix_socket`` in the site settings).  The gate must prove that path
works with the release being gated, so it cannot use the host's live relay: that one
runs the current release's code (or, at a first install, none), and it refuses root,
which the gate runs as, because root is no enrolled engineer.

So inside the gate's private namespaces (``installer._isolate``) a tmpfs covers the
socket's directory, and the release's own ``abhed model-relay --gate`` listens on the
settings' socket path there, with the host's credential, forwarding to the declared
model endpoints (the only addresses the gate's network reaches).  A gate relay admits
only its own uid (the gate's probe, root) and sends it as ``models.GATE_ENGINEER``, a
name the relay and ``engineer enroll`` refuse to any user: the front's record shows the
gate's requests as the gate's, never as an engineer's, and the auditor's join counts
them apart.  Why a gate identity and not an enrolled engineer: the gate would otherwise
run as (and write files as) a person, and the record would show requests that person
never made.

Called only inside the gate's private mount namespace: nothing it mounts is seen on the
host, and the relay it starts is stopped before the gate's child exits.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from foundation import terminate_group

from ._errors import HealthCheckFailed
from ._layout import Layout
from ._proc import child_env

__all__ = ["gate_relay", "relay_socket"]

_START_S = 60.0


def relay_socket(release: Path) -> str | None:
    """The relay socket the release's site settings give engineers (their default
    provider's ``unix_socket``); None when engineers dial the endpoints themselves."""
    try:
        body: Any = json.loads((release / "site/settings.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    providers = [p for p in body.get("custom_providers") or [] if isinstance(p, dict)]
    default = body.get("default_provider")
    chosen = next((p for p in providers if p.get("name") == default), None)
    sock = chosen.get("unix_socket") if chosen is not None else None
    return sock if isinstance(sock, str) and sock.startswith("/") else None


@contextmanager
def gate_relay(release: Path, layout: Layout, endpoints: Sequence[str]) -> Iterator[str | None]:
    """While inside: the release's gate relay listens on the settings' socket (module doc);
    yields its path, or None when the settings use no relay (nothing is started)."""
    from ._isolate import private_dir
    from ._services import relay_argv, relay_upstreams

    sock = relay_socket(release)
    if sock is None:
        yield None
        return
    cred = layout.state_dir / "credential"
    missing = [p for p in (cred / "ca.pem", cred / "host.pem") if not p.is_file()]
    if missing:
        raise HealthCheckFailed(
            f"this host has no credential for the site's model service ({missing[0]} is "
            "missing), so its engineers' relay cannot reach it: install the host's credential "
            "first (abhed-installer credential install FILE, docs/model-service.md), then run "
            "this again")
    argv = [str(release / "venv/bin/abhed"),
            *relay_argv(layout, relay_upstreams(endpoints), socket=sock, gate=True)]
    with private_dir(Path(sock).parent):
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=child_env(), text=True,
                                start_new_session=True)
        try:
            _wait_listening(proc)
            yield sock
        finally:
            terminate_group(proc)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    """Its ``listening on`` line, or HealthCheckFailed with what it said instead."""
    assert proc.stdout is not None and proc.stderr is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    reader.join(_START_S)
    if line and line[0].startswith("listening on"):
        return
    terminate_group(proc)
    said = proc.stderr.read()[-2000:].strip() if proc.poll() is not None else ""
    raise HealthCheckFailed(f"the release's model relay did not start within {_START_S:g} s"
                            + (f": {said}" if said else "") + "; engineers' abhed could not reach "
                            "the model service through it. Nothing was switched")

