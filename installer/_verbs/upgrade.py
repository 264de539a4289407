"""``upgrade BUNDLE``: a new release beside the current one, gated, switched atomically."""

from __future__ import annotations

import argparse

from .._deploy import deploy
from .install import options


def run(args: argparse.Namespace) -> int:
    return deploy(options(args), "upgrade")
