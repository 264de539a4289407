"""One simple command: strip its wrappers, record it, and follow the routes by which it runs code."""

from __future__ import annotations

import os
import unicodedata

from tools.shell_parser._assign import check_assignments
from tools.shell_parser._ctx import Ctx, Io
from tools.shell_parser._model import SimpleCommand, Word
from tools.shell_parser._programs import handler_for
from tools.shell_parser._wrappers import peel


def resolve(words: list[Word], assigns: list[Word], io: Io, ctx: Ctx,
            computed: bool = False) -> None:
    """Judge the command ``words`` (after ``assigns``, with ``io``): itself and what it runs."""
    check_assignments(assigns, ctx)
    wrappers: list[str] = []
    env: list[Word] = list(assigns)
    while words and not words[0].dynamic:
        name = os.path.basename(words[0].text)
        peeled = peel(name, words)
        if peeled is None or not peeled.wrapped:
            break
        if peeled.unknown is not None:
            given = (f"the subcommand {peeled.unknown!r}, computed at run time (it may be one "
                     f"that runs a command)" if peeled.subcommand else
                     f"the option {peeled.unknown!r}, which policy does not know")
            ctx.out.add_unparseable(f"`{name}` is given {given}, so it cannot tell which word "
                                    f"{name} runs as a program")
            break
        check_assignments(peeled.assignments, ctx)
        env += peeled.assignments
        if peeled.shell:
            if peeled.words:
                ctx.script(_joined(peeled.words), peeled.label, wrappers=(*wrappers, name))
            else:
                break  # an interactive shell or nothing: the wrapper is the command
            return
        if not peeled.words:
            break  # runs nothing (command -v, sudo -l): the wrapper is the command itself
        wrappers.append(name)
        computed |= peeled.computed
        words = peeled.words
    if not words:
        if io.targets or wrappers:
            record(words, wrappers, io, ctx, computed)
        return
    cmd = record(words, wrappers, io, ctx, computed)
    if cmd.dynamic_program:
        return
    handler = handler_for(os.path.basename(words[0].text))
    if handler is not None:
        handler(words, io, ctx, env)


def _joined(words: list[Word]) -> Word:
    """Words a wrapper passes to ``sh -c`` as one string (``watch git status``)."""
    if len(words) == 1:
        return words[0]
    text = " ".join(w.text for w in words)
    return Word(text, " ".join(w.raw for w in words), "q".join(w.mask for w in words))


def record(words: list[Word], wrappers: list[str], io: Io, ctx: Ctx,
           computed: bool) -> SimpleCommand:
    """Add one simple command to the result, with how it is reached."""
    cmd = SimpleCommand(program=words[0].text if words else None,
                        args=[w.text for w in words[1:]],
                        redirects=[t.text for t in io.targets],
                        wrappers=[*ctx.wrappers, *wrappers],
                        dynamic_program=bool(words) and words[0].dynamic,
                        dynamic_args=any(w.dynamic for w in words[1:])
                        or any(t.dynamic for t in io.targets),
                        stdin_redirected=io.stdin is not None,
                        route=ctx.route, writes=list(io.writes), computed_operands=computed,
                        arg_dynamic=[w.dynamic for w in words[1:]])
    cmd.text = " ".join([*wrappers, *(w.text for w in words), *io.shown])
    ctx.out.commands.append(cmd)
    ctx.count()
    if words and words[0].dynamic:
        ctx.out.add_unparseable(
            f"the program name {words[0].raw!r} is computed at run time (a variable, a command "
            "substitution or a file-name pattern), so policy cannot tell what would run")
    elif words and any(c in words[0].text for c in " \t\n"):
        ctx.out.add_unparseable(
            f"the program name {words[0].text!r} holds blanks: what runs is a file of that name, "
            "not the command line it reads as")
    elif words:
        odd = _odd_characters(words[0].text)
        if odd:
            ctx.out.add_unparseable(
                f"the program name {words[0].text!r} contains {odd}; what a reviewer reads is not "
                "the program that runs")
    return cmd


def _odd_characters(name: str) -> str:
    """Non-ASCII or invisible characters in a program name, named for the reason."""
    odd = [c for c in name if ord(c) > 126 or ord(c) < 32]
    if not odd:
        return ""
    names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'control character')}"
                      for c in dict.fromkeys(odd))
    return f"characters outside printable ASCII ({names})"
