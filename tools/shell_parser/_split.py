"""The entry point: a command line in, every command it runs (and why some could not be read) out."""

from __future__ import annotations

from tools.shell_parser._ctx import Ctx
from tools.shell_parser._grammar import parse_script, resolve_words
from tools.shell_parser._lexer import Unreadable
from tools.shell_parser._model import MAX_CHARS, Parsed


def split_command(command: str) -> Parsed:
    """Every simple command in ``command``, with reasons for anything unreadable."""
    out = Parsed(commands=[], unparseable=[])
    if len(command) > MAX_CHARS:
        out.unparseable.append(f"the command is {len(command)} characters long; policy reads at "
                               f"most {MAX_CHARS}")
        return out
    if "\x00" in command:
        out.unparseable.append("the command contains a NUL byte, which bash would cut it at")
        return out
    try:
        parse_script(command, Ctx(out, parse_script, resolve_words))
    except Unreadable as exc:
        out.add_unparseable(str(exc))
    except RecursionError:
        out.add_unparseable("the command is nested too deeply to read")
    return out
