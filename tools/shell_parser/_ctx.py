"""The state one parse carries down its routes: where results go, how deep, by which way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tools.shell_parser._lexer import Heredoc, Unreadable
from tools.shell_parser._model import MAX_COMMANDS, MAX_DEPTH, OpaqueCode, Parsed, Word


def _placeholders(w: Word) -> str:
    """A computed word's text with each computed piece as a parameter the inner shell expands."""
    out: list[str] = []
    prev = ""
    for c, k in zip(w.text, w.mask, strict=True):
        if k == "x":
            if prev != "x":
                out.append("${__computed__}")
        elif c == "*" and k == "u":
            out.append("${__computed__}")
        else:
            out.append(c)
        prev = k
    return "".join(out)


@dataclass
class Stdin:
    """Where a command's standard input comes from (only when it is not the terminal)."""

    kind: str  # pipe | file | heredoc | herestring | procsub | fd
    word: Word | None = None
    doc: Heredoc | None = None
    source: str = ""  # for a pipe: the command writing into it

    def text(self) -> tuple[str | None, str]:
        """The text a program reads as a script, when it is written in the command, and what it is."""
        if self.kind == "heredoc" and self.doc is not None:
            if self.doc.dynamic:
                return None, "a here-document whose body the shell expands first"
            return self.doc.text, "the here-document"
        if self.kind == "herestring" and self.word is not None:
            if self.word.dynamic:
                return None, f"the here-string {self.word.raw[:60]!r}, computed at run time"
            return self.word.text + "\n", "the here-string"
        if self.kind == "pipe":
            return None, f"the output of `{self.source[:60]}` piped into it"
        if self.kind == "procsub" and self.word is not None:
            return None, f"the output of {self.word.raw[:60]}"
        if self.kind == "file" and self.word is not None:
            return None, f"the file {self.word.raw[:60]}"
        return None, "a file descriptor"


@dataclass
class Io:
    """A command's redirections: what it reads as stdin, what it names, what it writes."""

    stdin: Stdin | None = None
    targets: list[Word] = field(default_factory=list)  # files named by redirections
    shown: list[str] = field(default_factory=list)  # each as written: operator and target
    writes: list[str] = field(default_factory=list)  # files written by redirections


@dataclass
class Ctx:
    """Where results go, how deep the routes are nested, and the way taken to get here."""

    out: Parsed
    parse: Callable[[str, Ctx], None]  # the grammar's entry point, for a script found on a route
    resolve: Callable[[list[Word], Ctx, bool], None]  # judges one command given as words
    depth: int = 0
    route: tuple[str, ...] = ()
    wrappers: tuple[str, ...] = ()

    def via(self, label: str, wrappers: tuple[str, ...] = ()) -> Ctx:
        """The context for code reached through ``label`` (one level deeper)."""
        if self.depth + 1 > MAX_DEPTH:
            raise Unreadable(f"code nested more than {MAX_DEPTH} levels deep ({label}); policy "
                             "stops reading there")
        return Ctx(self.out, self.parse, self.resolve, self.depth + 1, (*self.route, label),
                   (*self.wrappers, *wrappers))

    def command(self, words: list[Word], label: str, computed: bool = False) -> None:
        """Judge a command given as words (``find -exec``'s, ``git bisect run``'s ...)."""
        if words:
            self.resolve(words, self.via(label), computed)

    def script(self, code: Word | str, label: str, wrappers: tuple[str, ...] = ()) -> None:
        """Judge shell text found on a route (``bash -c``'s script, ``eval``'s string ...)."""
        if isinstance(code, Word):
            if code.dynamic:
                self.out.add_unparseable(f"{label} is computed at run time ({code.raw[:80]!r}), "
                                         "so policy cannot read what it runs")
                # still read what is written, so a destructive command in it is named
                try:
                    self.parse(_placeholders(code), self.via(label, wrappers))
                except Unreadable:
                    pass
                return
            code = code.text
        self.parse(code, self.via(label, wrappers))

    def opaque(self, what: str, excerpt: str = "") -> None:
        """Record code that runs but cannot be judged (inline Python, a script from a pipe)."""
        excerpt = " ".join(excerpt.split())
        if len(excerpt) > 80:
            excerpt = excerpt[:77] + "..."
        item = OpaqueCode(what, excerpt, self.route)
        if item not in self.out.opaque:
            self.out.opaque.append(item)

    def count(self) -> None:
        if len(self.out.commands) > MAX_COMMANDS:
            raise Unreadable(f"the command runs more than {MAX_COMMANDS} simple commands")
