"""Where an awk program runs commands: ``system(...)``, ``print | "cmd"``, ``"cmd" | getline``.

A command written as a string literal is shell text and is judged as such;
one computed by the program (``system($0)``) cannot be judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\\\n)
  | (?P<comment>\#[^\n]*)
  | (?P<newline>\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+)
  | (?P<op>\|\||\|&|&&|[<>!=]=|\+\+|--|[-+*/%^]=|>>|[{}()\[\];,|<>!~?:$=+\-*/%^&.])
""", re.VERBOSE)
# After these tokens a "/" starts a regular expression, not a division.
_REGEX_AFTER = {"(", ",", "{", "}", ";", "!", "~", "&&", "||", "?", ":", "=", "==", "!=", "<",
                ">", "<=", ">=", "\n", "print", "printf", "return", "in", "+", "-", "*", "%",
                "^", "|"}


@dataclass
class AwkRuns:
    """Commands an awk program runs: literal shell text, and whether any are computed."""

    literal: list[str]
    computed: bool = False
    fed: list[str] | None = None  # literal commands that read the program's output as stdin

    def __post_init__(self) -> None:
        if self.fed is None:
            self.fed = []


def awk_runs(program: str) -> AwkRuns:
    toks = _tokens(program)
    if toks is None:
        return AwkRuns([], computed="system" in program or "|" in program)
    out = AwkRuns([])
    for k, (kind, text) in enumerate(toks):
        if kind == "name" and text == "system" and k + 1 < len(toks) and toks[k + 1][1] == "(":
            arg = _call_argument(toks, k + 1)
            if arg is None:
                out.computed = True
            else:
                out.literal.append(arg)
        elif kind == "op" and text in ("|", "|&"):
            before = toks[k - 1] if k else ("", "")
            after = toks[k + 1] if k + 1 < len(toks) else ("", "")
            if after == ("name", "getline"):
                if before[0] == "string" and (k < 2 or toks[k - 2][0] != "string"):
                    out.literal.append(_unescape(before[1]))
                else:
                    out.computed = True
            elif after[0] == "string" and (k + 2 >= len(toks) or toks[k + 2][0] in ("op", "newline")
                                           and toks[k + 2][1] in (";", "}", "\n", ")")):
                assert out.fed is not None
                out.fed.append(_unescape(after[1]))
            else:
                out.computed = True
    return out


def _call_argument(toks: list[tuple[str, str]], open_at: int) -> str | None:
    """The literal string argument of ``system("...")``, or ``None`` when it is computed."""
    if open_at + 2 < len(toks) and toks[open_at + 1][0] == "string" and toks[open_at + 2][1] == ")":
        return _unescape(toks[open_at + 1][1])
    return None


def _unescape(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _tokens(program: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(program):
        prev = next((t for t in reversed(out)), ("newline", "\n"))
        if program[i] == "/" and (prev[1] in _REGEX_AFTER or prev[0] == "newline"):
            j = i + 1
            in_bracket = False
            while j < len(program) and (in_bracket or program[j] != "/"):
                if program[j] == "\\":
                    j += 1
                elif program[j] == "[":
                    in_bracket = True
                elif program[j] == "]":
                    in_bracket = False
                elif program[j] == "\n":
                    return None
                j += 1
            if j >= len(program):
                return None
            out.append(("regex", program[i:j + 1]))
            i = j + 1
            continue
        m = _TOKEN.match(program, i)
        if m is None:
            return None
        kind = m.lastgroup or ""
        if kind not in ("space", "comment"):
            out.append((kind, m.group()))
        i = m.end()
    return out
