"""The one strict loader: read once, parse once, every problem reported with its location."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from foundation import (
    DocumentError,
    FileMissing,
    FileRefused,
    Problem,
    load_document,
    parse_document,
    validate_document,
)


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_turns: int = Field(default=10, gt=0)
    names: tuple[str, ...] = ()


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: Literal["plan", "ask", "auto"] = "ask"
    limits: Limits = Field(default_factory=Limits)
    models: list[Limits] = []
    when: str | None = None


def _load(path: Path, cap: int = 1 << 20) -> Doc:
    return load_document(path, Doc, what="config", cap=cap, hint="fix it, or remove it")


def test_a_valid_json_and_a_valid_toml_document_load(tmp_path: Path) -> None:
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"mode": "plan", "limits": {"max_turns": 3, "names": ["a", "b"]}}))
    assert _load(j) == Doc(mode="plan", limits=Limits(max_turns=3, names=("a", "b")))
    t = tmp_path / "c.toml"
    t.write_text('mode = "auto"\nwhen = "today"\n[limits]\nmax_turns = 4\nnames = ["x"]\n')
    doc = _load(t)
    assert (doc.mode, doc.limits, doc.when) == ("auto", Limits(max_turns=4, names=("x",)), "today")


def test_every_invalid_field_is_reported_each_with_its_location(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"mode": "yolo", "limits": {"max_turns": 0, "extra": 1},
                             "models": [{}, {"max_turns": "5"}], "typo": True}))
    with pytest.raises(DocumentError) as info:
        _load(p)
    where = [problem.where for problem in info.value.problems]
    assert sorted(where) == sorted(["mode", "limits.max_turns", "limits.extra",
                                    "models[1].max_turns", "typo"])
    lines = str(info.value).splitlines()
    assert lines[-1] == "fix it, or remove it"
    assert all(line.startswith(f"config {p}: ") for line in lines[:-1])
    text = str(info.value)
    assert f"config {p}: mode: Input should be 'plan', 'ask' or 'auto' (got 'yolo')" in text
    assert f"config {p}: typo: unknown key" in text
    # strict: a string is not an int, though it spells one
    assert f"config {p}: models[1].max_turns: Input should be a valid integer (got '5')" in text


def _the_problem(p: Path, body: bytes) -> tuple[Problem, str]:
    """Write ``body`` to ``p`` and load it: the one problem it is refused for, and the text."""
    p.write_bytes(body)
    with pytest.raises(DocumentError) as info:
        _load(p)
    (problem,) = info.value.problems
    return problem, str(info.value)


@pytest.mark.parametrize("body, where, says", [
    (b'{"mode": "ask",\n "limits": }', "line 2, column 12", "not valid JSON"),
    (b'{"mode": "ask", "mode": "plan"}', "(top level)", "duplicate key 'mode'"),
    (b'{"limits": {"max_turns": NaN}}', "limits.max_turns", "nan has no JSON form"),
    (b'{"when": [-Infinity]}', "when[0]", "-inf has no JSON form"),
    (b'[1, 2]', "(top level)", "must be a JSON object, not list"),
    (b'"text"', "(top level)", "must be a JSON object, not str"),
    (b'', "line 1, column 1", "not valid JSON"),
    (b'\xef\xbb\xbf{}', "line 1, column 1", "byte-order mark"),
    (b'{"mode": "a\xff"}', "line 1, column 12", "byte 0xff is not UTF-8"),
    (b'[' * 100_000 + b']' * 100_000, "(top level)", "nests too deeply"),
    (b'{"n": ' + b'9' * 5000 + b'}', "(top level)", "a number too long to read"),
])
def test_a_json_document_that_does_not_parse_names_where(tmp_path: Path, body: bytes, where: str,
                                                         says: str) -> None:
    p = tmp_path / "c.json"
    problem, text = _the_problem(p, body)
    assert problem.where == where and says in problem.message, text
    assert text.startswith(f"config {p}: {where}: ")


@pytest.mark.parametrize("body, where", [
    (b'mode = "ask"\nmode = "plan"\n', "line 2, column 14"),
    (b'[limits\n', "line 1, column 8"),
    (b'mode = \n', "line 1, column 8"),
])
def test_a_toml_document_that_does_not_parse_names_the_line(tmp_path: Path, body: bytes,
                                                             where: str) -> None:
    problem, _ = _the_problem(tmp_path / "c.toml", body)
    assert (problem.where, problem.message.startswith("not valid TOML: ")) == (where, True)


@pytest.mark.parametrize("body, where, says", [
    (b'when = 2026-01-02T03:04:05Z\n', "when", "a TOML date or time"),
    (b'[limits]\nnames = [1979-05-27]\n', "limits.names[0]", "a TOML date or time"),
    (b'[limits]\nmax_turns = nan\n', "limits.max_turns", "nan has no JSON form"),
    (b'when = -inf\n', "when", "-inf has no JSON form"),
    (b'a = ' + b'[' * 70 + b']' * 70 + b'\n', "a" + "[0]" * 64, "nested more than 64"),
])
def test_toml_values_json_cannot_hold_are_refused_by_key(tmp_path: Path, body: bytes, where: str,
                                                         says: str) -> None:
    problem, text = _the_problem(tmp_path / "c.toml", body)
    assert problem.where == where and says in problem.message, text


def test_every_value_json_cannot_hold_is_named_in_one_reading(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_bytes(b'when = 2026-01-02\n[limits]\nmax_turns = nan\nnames = [1979-05-27, "x"]\n')
    with pytest.raises(DocumentError) as info:
        _load(p)
    assert [problem.where for problem in info.value.problems] == [
        "when", "limits.max_turns", "limits.names[0]"]


def test_json_nested_past_the_limit_is_refused_by_key(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_bytes(b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}")
    with pytest.raises(DocumentError, match=r"a(\[0\]){64}: nested more than 64"):
        _load(p)


def test_the_file_is_read_only_if_regular_and_small(tmp_path: Path) -> None:
    with pytest.raises(FileMissing, match="no such file"):
        _load(tmp_path / "absent.json")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(FileRefused, match="named pipe"):  # refused at once, never waited on
        _load(fifo)
    with pytest.raises(FileRefused, match="directory"):
        _load(tmp_path)
    with pytest.raises(FileRefused, match="character device"):
        _load(Path("/dev/zero"))
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"when": "x" * 2000}))
    with pytest.raises(FileRefused, match="larger than 1000 bytes"):
        _load(big, cap=1000)


def test_prepare_fills_defaults_between_parse_and_validation(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text("{}")
    doc = load_document(p, Doc, what="config", cap=100,
                        prepare=lambda raw: raw.setdefault("when", str(tmp_path)))
    assert doc.when == str(tmp_path)


def test_parse_and_validate_apart_for_bytes_that_are_no_file() -> None:
    raw = parse_document(b'{"mode": "plan"}', what="manifest.json", source="the bundle")
    assert validate_document(raw, Doc, what="manifest.json", source="the bundle").mode == "plan"
    with pytest.raises(DocumentError, match=r"^manifest.json in x: mode: Input should be"):
        validate_document({"mode": 5}, Doc, what="manifest.json", source="in x")


def test_a_long_value_is_cut_in_the_message(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as info:
        validate_document({"mode": "y" * 10_000}, Doc, what="config", source="c")
    assert len(str(info.value)) < 200 and "…" in str(info.value)
