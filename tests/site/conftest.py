"""Fixtures of the simulated site (tests/site/harness.py): hosts, engineers, the model host.

* ``site``: one model host (``model-1``) and two engineers' hosts (``eng-1``
  with ana and bob, ``eng-2`` with cai and dee), each its own namespaces,
  /etc and users; one for the whole run (a real vLLM costs minutes on a
  CPU), torn down at its end: a test that starts services there stops them.
* ``site_bundle``: the one signed bundle of the whole site (tests/installer's
  ``make_bundle``: the agent's wheels, the tests' tiny model wired for the
  installer's gate (:func:`tests.site.harness.wired_model`) and the real vLLM
  command of tests/installer/test_real_vllm.py (the release's Python as a
  trampoline to the cached vLLM CPU venv), the site's settings for prefix
  ``/srv/abhed``, roles ``agent`` and ``model`` with ``model-1``'s front as the
  model endpoint), and the public key that verifies it.  A model host installed
  from it is gated by real vLLM and then serves from its release's units; an
  engineers' host is gated by a real tool call through the site's model service.

A test module that needs another shape calls :func:`tests.site.harness.build_site`
itself; the serving issue adds model hosts the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from installer._services import RELAY_SOCKET
from tests.installer.conftest import BundleMaker, Keys

# tests/installer's session fixtures, shared (not copied): the site's bundle is made as theirs.
from tests.installer.conftest import agent_wheel as agent_wheel
from tests.installer.conftest import keys as keys
from tests.installer.conftest import make_bundle as make_bundle
from tests.installer.conftest import wheelhouse as wheelhouse
from tests.installer.test_real_vllm import WIRED_BAR, real_vllm_descriptor
from tests.site.harness import ENGINEERS, Site, build_site, wired_model
from tests.site.model_service import PREFIX
from tests.vllm_server import vllm_python

# model-1 is the site's first host (harness: 10.213.0.1); its front's port (installer units).
MODEL_ENDPOINT = "https://model-1:8443/v1"


@dataclass(frozen=True)
class SiteBundle:
    """The site's signed bundle and the publisher's key that verifies it."""

    path: Path
    trust: Path


def relay_settings(served: str) -> dict[str, Any]:
    """The site's agent settings (the bundle's ``[agent]``): the engineers' provider goes
    through the host's relay (docs/model-service.md), at temperature 0, four turns at most."""
    provider = {"name": "site", "api": "openai", "base_url": "http://model-service/v1",
                "unix_socket": RELAY_SOCKET, "model": served,
                "sampling": ["temperature", "seed", "max_tokens"],
                "params": {"temperature": 0, "max_tokens": 64}, "max_retries": 1}
    return {"custom_providers": [provider], "default_provider": "site",
            "loop": {"max_turns": 4}}


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    built = build_site(ENGINEERS)
    try:
        yield built
    finally:
        built.close()


# The site's bar: the wired model's own (tests/installer/test_real_vllm.py, where the gate
# runs every wire case against real vLLM) with the gate's --quick narrowed to the one case
# this site holds its model to, as a site on a slow host does (docs/probe.md, quick_cases):
# the model host's gate still probes real vLLM through the release, in one case, not eleven.
SITE_BAR = {**WIRED_BAR, "quick_cases": ["wire.glob"],
            "note": WIRED_BAR["note"] + "; the site's gate holds it to the glob case"}


@pytest.fixture(scope="session")
def site_bundle(make_bundle: BundleMaker, keys: Keys) -> SiteBundle:
    """One bundle for the whole site.  Its model is the wired tiny model served by real
    vLLM (a model host's parts; verified on an agent host, never unpacked there); the
    agent probe of every host's gate forces the glob call the wired model makes."""
    python = vllm_python()
    made = make_bundle(1, name="abhed-site", serve=real_vllm_descriptor(python), script=[],
                       model_from=wired_model(python), bar=SITE_BAR,
                       site=relay_settings("tiny"), prefix=Path(PREFIX),
                       roles={"hosts": ["agent", "model"], "model_endpoints": [MODEL_ENDPOINT]})
    return SiteBundle(made, keys.pub)
