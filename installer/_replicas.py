"""On the model host that runs the router: every model host behind it, checked before the
switch (the health gate's ``replicas`` step).

The front checks the replicas again each time it starts (models.service._front), but it starts
after the switch; the gate is where an install or upgrade can still refuse with nothing
changed.  Each replica is asked by the release's own ``abhed serve --check-host`` (the one
check, models._host_check: served name, ``max_model_len``, vLLM version), with the key
vLLM demands from the host's key file in its environment, never argv.  As the front does:
a replica answering otherwise than declared is refused, naming it and the field; one that
does not answer is the router's to route around (a host being upgraded itself), noted;
none answering is refused, since the model service would answer nothing.  A replica on
loopback is this host's own vLLM, which the gate has just checked as the new release
starts it (the running one still serves the release being replaced); so in an upgrade
that changes the model, the router's host is upgraded last (docs/installer.md).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from ._errors import HealthCheckFailed
from ._layout import Layout
from ._proc import child_env, run
from ._roles import RouterPlan

__all__ = ["UNREACHABLE_EXIT", "check_replicas"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")

UNREACHABLE_EXIT = 4
"""``abhed serve --check-host``'s exit when the host did not answer (cli/serve.py);
1 is a refusal naming the field."""


def check_replicas(release: Path, layout: Layout, plan: RouterPlan,
                   timeout_s: float = 120.0) -> str:
    """The gate's detail line; HealthCheckFailed when a replica differs or none answers."""
    from ._services import vllm_key_path

    if plan.catalog is None:
        raise HealthCheckFailed("the router's replicas cannot be checked: the release "
                                "declares no model (models/<name>/abhed-serve.json)")
    env = child_env({"ABHED_HOME": str(layout.data)})
    env.pop("VLLM_API_KEY", None)
    key = vllm_key_path(layout)
    if key.is_file():
        env["VLLM_API_KEY"] = key.read_text("utf-8").strip()
    log = layout.logs / f"gate-{release.name}-replicas.log"
    log.unlink(missing_ok=True)
    down: list[str] = []
    others = [r for r in plan.replicas if urlsplit(r).hostname not in _LOOPBACK]
    for root in others:
        argv = [str(release / "venv/bin/abhed"), "serve", "--catalog", plan.catalog,
                "--check-host", root]
        done = run(argv, log=log, env=env, timeout_s=timeout_s, cwd=release)
        said = " | ".join(ln for ln in done.output.splitlines()[-2:] if ln.strip())
        if done.returncode == UNREACHABLE_EXIT or done.timed_out:
            down.append(root)
        elif done.returncode != 0:
            raise HealthCheckFailed(f"model host {root} behind the router does not serve what "
                                    f"the site declared: {said}. Nothing was switched. Fix or "
                                    f"upgrade that host first. Log: {log}")
    if others and len(down) == len(plan.replicas):
        raise HealthCheckFailed(f"no model host behind the router answers ({', '.join(down)}): "
                                "the model service would answer nothing. Nothing was switched. "
                                f"Start the model hosts (or fix [roles.router] replicas). Log: {log}")
    ok = len(others) - len(down)
    return (f"{ok} of {len(others)} other model hosts serve as declared"
            + (f"; not answering (the router routes around them): {', '.join(down)}"
               if down else ""))
