"""The scripted model servers' ``--script`` (``python -m models.scripted`` and ``python -m
appliance.probe.scripted``): one strict reader (models.scripted.read_script, on foundation's), so a
hostile, cut, oversized or wrong-shaped file is refused in its words before anything listens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from foundation import DocumentError, FileRefused
from models.scripted import read_script

BAD = {
    "duplicate key": (b'[{"text": "a", "text": "b"}]', "duplicate key 'text'"),
    "cut short": (b'[{"text": "a"}', "not valid JSON"),
    "not a list": (b'{"text": "a"}', "must be a JSON array, not dict"),
    "NaN": (b'[{"delay_s": NaN}]', "nan has no JSON form"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_script_is_refused_by_where(tmp_path: Path, case: str) -> None:
    body, says = BAD[case]
    script = tmp_path / "steps.json"
    script.write_bytes(body)
    with pytest.raises(DocumentError, match=says):
        read_script(script)


def test_a_good_script_is_its_steps(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text('[{"text": "5"}, {"tool_calls": [{"name": "glob", "arguments": {}}]}]')
    assert read_script(script) == [{"text": "5"}, {"tool_calls": [{"name": "glob",
                                                                   "arguments": {}}]}]


def test_an_oversized_or_missing_script_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(17 << 20)  # sparse: over the 16 MiB cap without writing it
    with pytest.raises(FileRefused, match="big.json"):
        read_script(big)
    with pytest.raises(FileRefused, match="nope.json"):
        read_script(tmp_path / "nope.json")


@pytest.mark.parametrize("door", ["models.scripted", "appliance.probe.scripted"])
def test_each_door_refuses_with_the_readers_words(tmp_path: Path, door: str) -> None:
    script = tmp_path / "steps.json"
    script.write_bytes(BAD["duplicate key"][0])
    done = subprocess.run([sys.executable, "-m", door, "--script", str(script), "--port", "0"],
                          capture_output=True, text=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "listening" not in done.stdout, done.stdout + done.stderr
    assert f"script {script}: " in done.stderr and "duplicate key 'text'" in done.stderr
