"""Fixtures of the simulated site (tests/site/harness.py): hosts, engineers, the model host.

* ``site``: one model host (``model-1``) and two engineers' hosts (``eng-1``
  with ana and bob, ``eng-2`` with cai and dee), each its own namespaces,
  /etc and users; one for the whole run (a real vLLM costs minutes on a
  CPU), torn down at its end: a test that starts services there stops them.
* ``site_vllm``: real vLLM (CPU build, the tiny test model) started by
  ``abhed serve`` on the model host, listening on the model host's loopback
  only; its base URL as seen from the model host.

A test module that needs another shape calls :func:`tests.site.harness.build_site`
itself; the serving issue adds model hosts the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.site.harness import ENGINEERS, Site, SiteVllm, build_site, start_vllm


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    built = build_site(ENGINEERS)
    try:
        yield built
    finally:
        built.close()


@pytest.fixture(scope="session")
def site_vllm(site: Site) -> SiteVllm:
    return start_vllm(site, site.hosts["model-1"])
