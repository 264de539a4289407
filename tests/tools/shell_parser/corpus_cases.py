"""The command corpus (corpus/shell_commands.toml), loaded once for every test that uses it.

A helper module, not a test module, so that the corpus test and ``abhed policy explain
--batch``'s test share the cases without importing each other.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "corpus" / "shell_commands.toml"


def load_corpus() -> list[tuple[str, dict[str, Any]]]:
    """(command, case) for every case; long commands are spelled prefix + unit * times + suffix."""
    cases = tomllib.loads(CORPUS.read_text(encoding="utf-8"))["case"]
    out = []
    for c in cases:
        command = c["command"] if "command" in c else c["prefix"] + c["unit"] * c["times"] + c["suffix"]
        out.append((command, c))
    return out


CASES = load_corpus()
