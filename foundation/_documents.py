"""One strict loader for config-like files: read once, parse once, report every problem.

Every file an operator or a build writes for Abhed to read (config.json, the
model catalog, a bundle or site spec, a manifest, the installer's descriptor
and record) goes through the same three steps:

1. **read** (:func:`~foundation.read_regular`): a regular file only (never
   blocks on a FIFO, refuses devices and directories), at most ``cap`` bytes;
2. **parse** (:func:`parse_document`): JSON or TOML, UTF-8 without a BOM, a
   table at the top; JSON refuses duplicate keys (two readers could see
   different values); both refuse ``NaN``/``Infinity``, TOML's dates and times
   and nesting past :data:`MAX_DEPTH`, each by its key; a syntax error names its
   line and column;
3. **validate** (:func:`validate_document`): the pydantic model in strict
   mode (no ``"5"`` for 5, no ``1`` for ``true``; unknown keys are the model's
   to refuse), reporting *every* invalid field with its dotted location, not
   the first only.

Failures raise :class:`~foundation.DocumentError` (or ``FileRefused`` from the
read), whose message is one line per problem, ``WHAT SOURCE: WHERE: MESSAGE``,
then the caller's hint.  Callers re-raise it as their own package's error with
the same message.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from foundation._errors import DocumentError, FileMissing, Problem
from foundation._regular import read_regular

__all__ = ["Syntax", "load_document", "parse_document", "parse_json_list", "problems_of",
           "read_document", "validate_document"]

Syntax = Literal["json", "toml"]
if TYPE_CHECKING:  # pydantic is imported where a document is validated: the doors that only
    # name a mode (bare `abhed`, before the TUI's first frame) import foundation without it
    from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound="BaseModel")

_TOP = "(top level)"
_TOML_AT = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)$")


class _Refused(ValueError):
    """Raised inside the JSON parser (a duplicate key); becomes one Problem at ``where``."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where or _TOP


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r}: refused (two readers could see different "
                           "values); keep one")
        out[key] = value
    return out


def _line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


MAX_DEPTH = 64  # tables within tables: no config-like file needs more


def _plain(value: Any, problems: list[Problem], where: str = "", depth: int = 0) -> Any:
    """``value`` as plain JSON data; each value it cannot hold is a Problem at its key.

    TOML has dates, times and ``nan``/``inf``, which no Abhed file takes and JSON
    cannot hold; refusing them by key beats a crash or a silent string.  Every such
    value is found in one walk, so one reading names them all.
    """
    if depth > MAX_DEPTH:
        problems.append(Problem(where, f"nested more than {MAX_DEPTH} levels deep: refused"))
        return None
    if isinstance(value, dict):
        return {k: _plain(v, problems, f"{where}.{k}" if where else k, depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, problems, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(Problem(where or _TOP, f"{value} has no JSON form: give a finite number"))
    elif isinstance(value, datetime.date | datetime.time):  # datetime is a date
        problems.append(Problem(where or _TOP, "a TOML date or time: no setting takes one; "
                                "write it as a quoted string if the setting is text"))
    return value


def _syntax_of(source: str | Path) -> Syntax:
    return "toml" if str(source).endswith(".toml") else "json"


def parse_document(data: bytes, *, what: str, source: str | Path,
                   syntax: Syntax | None = None, hint: str = "") -> dict[str, Any]:
    """``data`` parsed as JSON or TOML (by ``source``'s suffix unless given): a table.

    Raises:
        DocumentError: not UTF-8, a BOM, a syntax error (with line and column), a
            duplicate JSON key, ``NaN``, nesting too deep, or not a table at the top.
    """
    syntax = syntax or _syntax_of(source)
    raw = _parse(data, what, source, syntax, hint)
    if not isinstance(raw, dict):
        raise DocumentError(what, str(source), [Problem(_TOP, (
            f"must be a {'table' if syntax == 'toml' else 'JSON object'}, "
            f"not {type(raw).__name__}"))], hint)
    return raw


def parse_json_list(data: bytes, *, what: str, source: str | Path, hint: str = "") -> list[Any]:
    """``data`` parsed as JSON with :func:`parse_document`'s strictness: a list at the top
    (a script of steps, a list of records).

    Raises:
        DocumentError: as :func:`parse_document`, or not a list at the top.
    """
    raw = _parse(data, what, source, "json", hint)
    if not isinstance(raw, list):
        raise DocumentError(what, str(source), [Problem(
            _TOP, f"must be a JSON array, not {type(raw).__name__}")], hint)
    return raw


def read_document(path: str | Path, *, what: str, cap: int, syntax: Syntax | None = None,
                  hint: str = "") -> dict[str, Any]:
    """The file at ``path`` read (:func:`~foundation.read_regular`, at most ``cap`` bytes) and
    parsed (:func:`parse_document`): a table, not yet validated.

    Raises:
        FileMissing: no such file.
        FileRefused: unreadable, not a regular file, or over ``cap`` bytes.
        DocumentError: it does not parse.
    """
    return parse_document(read_regular(path, cap, what), what=what, source=path, syntax=syntax,
                          hint=hint)


def _parse(data: bytes, what: str, source: str | Path, syntax: Syntax, hint: str) -> Any:
    """``data`` as plain data, any JSON value at the top; :func:`parse_document`'s checks
    but the top's type."""

    def refuse(where: str, message: str) -> DocumentError:
        return DocumentError(what, str(source), [Problem(where, message)], hint)

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[:exc.start].decode("utf-8", "replace")
        raise refuse(_line_col(head, len(head)),
                     f"byte {data[exc.start]:#04x} is not UTF-8; save the file as UTF-8") from None
    if text.startswith("\ufeff"):
        raise refuse("line 1, column 1", "a byte-order mark (BOM); save the file as UTF-8 "
                     "without one")
    problems: list[Problem] = []
    try:
        if syntax == "toml":
            raw: Any = _plain(tomllib.loads(text), problems)
        else:
            # NaN and Infinity parse as floats, to be refused by key below with TOML's nan.
            raw = _plain(json.loads(text, object_pairs_hook=_no_duplicates), problems)
    except json.JSONDecodeError as exc:
        raise refuse(f"line {exc.lineno}, column {exc.colno}",
                     f"not valid JSON: {exc.msg}") from None
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_AT.match(str(exc))
        where, msg = (f"line {m['line']}, column {m['col']}", m["msg"]) if m else (_TOP, str(exc))
        raise refuse(where, f"not valid TOML: {msg}") from None
    except _Refused as exc:
        raise refuse(exc.where, str(exc)) from None
    except RecursionError:
        raise refuse(_TOP, "nests too deeply: refused") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise refuse(_TOP, f"holds a number too long to read: {str(exc)[:120]}") from None
    if problems:
        raise DocumentError(what, str(source), problems, hint)
    return raw


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or _TOP


def _message(error: Any) -> str:
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if kind == "extra_forbidden":
        return "unknown key: refused (a typo, or a file written for a newer version)"
    if kind == "missing":
        return "required, and missing"
    if kind in ("value_error", "assertion_error"):  # the model's own words, not pydantic's frame
        msg = str(msg).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if isinstance(value, str | int | float | bool) or value is None:
        shown = repr(value)
        return f"{msg} (got {shown[:60] + '…' if len(shown) > 60 else shown})"
    return str(msg)


def problems_of(exc: ValidationError) -> list[Problem]:
    """Every error pydantic found, each at its dotted location (``models[0].name``)."""
    return [Problem(_where(tuple(e["loc"])), _message(e)) for e in exc.errors()]


def validate_document(raw: dict[str, Any], model: type[M], *, what: str, source: str | Path,
                      hint: str = "", strict: bool = True) -> M:
    """``raw`` as ``model``, strictly; every invalid field is reported, each at its location.

    Validation goes through JSON text so that, in strict mode, arrays may fill
    tuples and sets and strings may fill enums and paths, as they do in any
    file, while ``"5"`` still does not fill an int.
    """
    from pydantic import ValidationError  # heavy: see the TYPE_CHECKING note above

    try:
        return model.model_validate_json(json.dumps(raw), strict=strict)
    except ValidationError as exc:
        raise DocumentError(what, str(source), problems_of(exc), hint) from None


def load_document(path: str | Path, model: type[M], *, what: str, cap: int,
                  syntax: Syntax | None = None, hint: str = "",
                  prepare: Callable[[dict[str, Any]], None] | None = None) -> M:
    """Read, parse and validate the file at ``path`` as ``model`` (see the module docstring).

    ``prepare`` may fill in defaults that depend on where the file is (the catalog's
    ``base_dir``) between parsing and validation.

    Raises:
        FileMissing: no such file (a caller with a default catches this one).
        FileRefused: unreadable, not a regular file, or over ``cap`` bytes.
        DocumentError: it does not parse or is invalid; every problem, located.
    """
    raw = read_document(path, what=what, cap=cap, syntax=syntax, hint=hint)
    if prepare is not None:
        prepare(raw)
    return validate_document(raw, model, what=what, source=path, hint=hint)


def load_if_present(path: str | Path, model: type[M], *, what: str, cap: int,
                    hint: str = "") -> M | None:
    """:func:`load_document` for a JSON record a program keeps (state, caches, metadata):
    ``None`` when there is none yet.

    The same strictness as every other file (duplicate keys, ``NaN``, unknown
    fields refused, each problem located), so a damaged record is reported in
    one style wherever it is read; the caller decides whether damage is fatal.

    Raises:
        FileRefused: there, but unreadable, not a regular file, or over ``cap`` bytes.
        DocumentError: it does not parse or is invalid.
    """
    try:
        return load_document(path, model, what=what, cap=cap, syntax="json", hint=hint)
    except FileMissing:
        return None
