"""Fixtures of the simulated site (tests/site/harness.py): hosts, engineers, the model host.

* ``site``: one model host (``model-1``) and two engineers' hosts (``eng-1``
  with ana and bob, ``eng-2`` with cai and dee), each its own namespaces,
  /etc and users; module-scoped, torn down after.
* ``site_vllm``: real vLLM (CPU build, the tiny test model) started by
  ``abhed serve`` on the model host, listening on the model host's loopback
  only; its base URL as seen from the model host.

A test module that needs another shape calls :func:`tests.site.harness.build_site`
itself; the serving issue adds model hosts the same way.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.site.harness import Site, SiteHost, build_site
from tests.vllm_server import SERVED, entry_for, free_port, tiny_model, vllm_python, write_home

ENGINEERS = {"eng-1": ("ana", "bob"), "eng-2": ("cai", "dee")}


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    built = build_site(ENGINEERS)
    try:
        yield built
    finally:
        built.close()


@dataclass(frozen=True)
class SiteVllm:
    host: SiteHost
    base_url: str  # on the model host's loopback
    served: str


def start_vllm(site: Site, host: SiteHost) -> SiteVllm:
    """``abhed serve`` on ``host`` (as root, its /srv/vllm home); waits for its URL."""
    python = vllm_python()
    entry = entry_for(tiny_model(python))
    port = free_port()
    home = host.path("/srv/vllm")
    write_home(home, python, entry, port)
    proc = site.service(host, [sys.executable, "-m", "cli", "serve", "--model", "tiny"],
                        env={"ABHED_HOME": "/srv/vllm"})
    assert proc.stdout is not None and proc.stderr is not None
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.wait(60)
        log = home / "logs" / "vllm-tiny.log"
        tail = log.read_text()[-4000:] if log.exists() else ""
        raise RuntimeError(f"abhed serve did not start vLLM on {host.name}: "
                           f"{''.join(errors)[-2000:]}\n{tail}")
    return SiteVllm(host, url, SERVED)


@pytest.fixture(scope="module")
def site_vllm(site: Site) -> SiteVllm:
    return start_vllm(site, site.hosts["model-1"])
