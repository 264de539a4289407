"""What the parser hands back: words, simple commands, code it could not judge."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# Limits that keep a hostile command from costing more than a refusal does.
MAX_DEPTH = 8  # routes nested deeper than this (sh -c 'bash -c "..."' ...) ask
MAX_CHARS = 100_000  # a longer command line asks unread
MAX_COMMANDS = 5_000  # simple commands, all levels together
MAX_BRACE_WORDS = 1_000  # words one brace expansion may become


@dataclass
class Word:
    """One shell word as the lexer read it.

    ``text`` has quoting undone; expansions (``$X``, ``$(...)``) are kept as
    written.  ``mask`` has one flag per character of ``text``: ``u`` an
    unquoted literal (subject to brace expansion and globbing), ``q`` a quoted
    or escaped literal, ``x`` part of an expansion.
    """

    text: str
    raw: str
    mask: str
    quoted: bool = False  # any quote or backslash in the raw word
    procsub: bool = False  # the word is (or holds) a process substitution <(...)

    @property
    def dynamic(self) -> bool:
        """Whether the shell computes part of this word at run time (expansion or glob)."""
        return "x" in self.mask or self.glob

    @property
    def glob(self) -> bool:
        """An unquoted ``*``, ``?`` or ``[...]``: the shell turns it into file names."""
        m, t = self.mask, self.text
        if "*" not in t and "?" not in t and "[" not in t:
            return False
        for i, c in enumerate(t):
            if m[i] != "u":
                continue
            if c in "*?":
                return True
            if c == "[" and any(t[j] == "]" and m[j] == "u" for j in range(i + 2, len(t))):
                return True
        return False

    def computed_where(self, mark: str) -> Word:
        """This word with each ``mark`` in it computed (``{}`` filled in by find or xargs)."""
        if mark not in self.text:
            return self
        mask = list(self.mask)
        start = self.text.find(mark)
        while start >= 0:
            mask[start:start + len(mark)] = "x" * len(mark)
            start = self.text.find(mark, start + len(mark))
        return Word(self.text, self.raw, "".join(mask), self.quoted, self.procsub)

    @staticmethod
    def literal(text: str) -> Word:
        """A word with no expansions (what a wrapper such as ``env -S`` or an alias spells)."""
        return Word(text, text, "q" * len(text))


@dataclass
class SimpleCommand:
    """One command the shell would run: program, arguments, redirections, and how it is reached.

    ``program`` is ``None`` for a command that only assigns variables or only
    redirects.  ``wrappers`` lists programs such as ``sudo`` or ``xargs`` that
    were stripped from the front to find the real program.  ``route`` is the
    chain of routes by which the command runs when it is not written at the
    top level (``("the script of bash -lc",)``), for the reasons policy gives.
    """

    program: str | None
    args: list[str] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)  # targets of > >> < etc.
    wrappers: list[str] = field(default_factory=list)
    dynamic_program: bool = False
    dynamic_args: bool = False
    text: str = ""
    stdin_redirected: bool = False  # stdin is a file, here-document, here-string or pipe
    route: tuple[str, ...] = ()
    writes: list[str] = field(default_factory=list)  # targets of output redirections
    computed_operands: bool = False  # gets more arguments at run time (xargs, find -exec {})
    arg_dynamic: list[bool] = field(default_factory=list)

    @property
    def subcommand(self) -> str | None:
        """The first word after the program that is not an option (``git status`` -> status)."""
        skip_next = False
        for a in self.args:
            if skip_next:
                skip_next = False
                continue
            if self.program_name == "git" and a in {"-C", "-c", "--git-dir", "--work-tree",
                                                    "--namespace", "--exec-path"}:
                skip_next = True
                continue
            if a.startswith("-"):
                continue
            return a
        return None

    @property
    def program_name(self) -> str | None:
        """The program's base name (``/bin/rm`` -> ``rm``), for pattern checks."""
        return os.path.basename(self.program) if self.program else None

    @property
    def where(self) -> str:
        """How the command is reached, for a reason: ``runs the script of bash -lc: rm -rf x``."""
        if not self.route:
            return self.text
        return "runs " + " -> ".join(self.route) + ": " + self.text


@dataclass
class OpaqueCode:
    """Code a command runs that policy cannot judge (Python, a script read from a pipe, ...)."""

    what: str  # "python3 -c (Python code)"
    excerpt: str  # the start of the code, or where it comes from
    route: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for a reason: what runs, through which route, and the start of it."""
        via = " (" + "runs " + " -> ".join(self.route) + ")" if self.route else ""
        excerpt = f": {self.excerpt}" if self.excerpt else ""
        return f"{self.what}{via}{excerpt}"


@dataclass
class Parsed:
    """The simple commands of one command line, or why it could not be read.

    ``unparseable`` holds reasons the shell text itself could not be read with
    certainty; ``opaque`` holds code the command runs that policy cannot judge
    (inline interpreter code, a script read from a pipe).  Policy asks about
    both instead of guessing.
    """

    commands: list[SimpleCommand]
    unparseable: list[str]  # reasons, each naming the piece that could not be read
    functions: list[str] = field(default_factory=list)  # names of shell functions defined
    opaque: list[OpaqueCode] = field(default_factory=list)

    def add_unparseable(self, reason: str) -> None:
        if reason not in self.unparseable:
            self.unparseable.append(reason)
