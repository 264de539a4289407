"""The offline environment is written twice on purpose; this keeps the copies in step.

``installer`` may not import ``models`` (it is frozen with PyInstaller and
depends on ``bundle`` only), so ``installer._proc.OFFLINE_ENV`` repeats what
``models._serve.OFFLINE_ENV`` sets for vLLM.  The installer's copy may add
more (it also starts the agent), never less.
"""

from __future__ import annotations

from installer._proc import OFFLINE_ENV as INSTALLER_ENV
from models._serve import OFFLINE_ENV as SERVE_ENV


def test_installer_sets_every_offline_variable_the_model_server_needs() -> None:
    missing = {k: v for k, v in SERVE_ENV.items() if INSTALLER_ENV.get(k) != v}
    assert missing == {}
    assert INSTALLER_ENV["HF_HUB_OFFLINE"] == "1"
