"""The auditor's own script from docs/event-log.md, run as an auditor would run it."""

from __future__ import annotations

from pathlib import Path


def auditor_script() -> str:
    """The script docs/event-log.md tells an auditor to run (stdlib only, no Abhed), as written."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "event-log.md").read_text()
    section = doc[doc.index("## Export: the record an auditor takes away"):]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def auditor_run(path: Path) -> list[str]:
    """Run the docs' auditor script on the export at ``path`` in a bare interpreter; its lines."""
    import subprocess
    import sys

    code = auditor_script().replace('open("audit.jsonl"', f"open({str(path)!r}")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def auditor_verify(path: Path) -> tuple[int, str]:
    """The docs' auditor check: the last event it vouches for."""
    ok, seq, last = auditor_run(path)[0].split()
    assert ok == "ok"
    return int(seq), last
