"""What the door tests share: the scripted model server the engineer's config points at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from models.scripted import ScriptedServer
from tests.appliance.helpers import write_config


@pytest.fixture
def server(abhed_home: Path) -> Iterator[ScriptedServer]:
    """A scripted server, written into ``config.json`` as the provider (a test module that
    wants the server without that config defines its own ``server``)."""
    with ScriptedServer() as s:
        write_config(abhed_home, s.base_url)
        yield s
