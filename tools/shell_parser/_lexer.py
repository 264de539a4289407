"""Shell text to tokens: words with quoting undone, operators, redirections, here-documents.

Every command substitution (``$(...)``, backticks, ``<(...)``, and those
inside ``${...}``, ``$((...))`` and unquoted here-document bodies) is handed
to ``on_subst`` as it is met, because the commands inside it run too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.shell_parser._model import Word


class Unreadable(Exception):
    """The text cannot be read with certainty; the message says which piece and why."""


@dataclass
class Heredoc:
    """A here-document; ``body`` is filled in when the lexer reaches its lines.

    ``text`` is the body as the command reads it (backslash escapes of an
    unquoted body undone); ``dynamic`` says whether the shell expands
    something in it first (``$X``, ``$(...)``), which makes that text computed.
    """

    delimiter: str
    strip_tabs: bool
    quoted: bool
    text: str = ""
    dynamic: bool = False


@dataclass
class Redir:
    op: str  # > >> >| &> &>> < << <<- <<< <> >& <&
    target: Word | None = None
    heredoc: Heredoc | None = None
    fd: str = ""  # the descriptor written before the operator (2>, {var}>), kept for re-printing


@dataclass
class Arith:
    """An arithmetic command ``(( ... ))``: it runs no program itself."""

    text: str


@dataclass
class Op:
    op: str


Token = Word | Op | Redir | Arith

_OPERATORS = (";;&", "&&", "||", ";;", ";&", "|&", ";", "|", "&")
_REDIRECT = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})?(&>>|&>|>>|>\||>&|<&|<<<|<<-|<<|<>|>|<)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_PLAIN = re.compile(r"[^\s;|&()<>\\'\"$`]+")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_ASSIGN_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=$")
# Reserved words after which the next word is again a command.
_LEADING_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "for"}
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
         "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def ansi_c(body: str) -> str:
    """The value of a ``$'...'`` string, as bash computes it."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ANSI:
            out.append(_ANSI[n])
            i += 2
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert m is not None
            out.append(chr(int(m.group(), 8) & 0xFF))
            i += 1 + m.end()
        elif n in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[n]
            m = re.match(rf"[0-9A-Fa-f]{{1,{width}}}", body[i + 2:])
            if m is None:
                out.append("\\" + n)
                i += 2
            else:
                out.append(chr(min(int(m.group(), 16), 0x10FFFF)))
                i += 2 + m.end()
        elif n == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2].upper()) ^ 0x40))
            i += 3
        else:
            out.append("\\" + n)
            i += 2
    return "".join(out)


class Lexer:
    """Turns a command string into tokens, undoing quotes the way bash does."""

    def __init__(self, src: str, on_subst: Callable[[str], None]) -> None:
        self.s = src
        self.i = 0
        self.on_subst = on_subst
        self.pending: list[Heredoc] = []
        self.cmdpos = True
        self.in_cond = False  # between [[ and ]]

    # -- tokens -------------------------------------------------------------
    def tokens(self) -> list[Token]:
        toks: list[Token] = []
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2  # a line continuation is no word at all
                continue
            if c == "\n":
                self.i += 1
                self._read_heredocs()
                if not self.in_cond:
                    toks.append(Op("\n"))
                    self.cmdpos = True
                continue
            if c in " \t\r":
                self.i += 1
                continue
            if c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
                continue
            if self.in_cond:
                toks.append(self._cond_token())
                continue
            if self.cmdpos and s.startswith("((", self.i):
                arith = self._arith_command()
                if arith is not None:
                    toks.append(arith)
                    self.cmdpos = False
                    continue
            op = None
            if c in ";|&" and not s.startswith(("&>", "&>>"), self.i):
                op = next((o for o in _OPERATORS if s.startswith(o, self.i)), None)
            if op is not None:
                toks.append(Op(op))
                self.i += len(op)
                self.cmdpos = True
                continue
            if c in "()":
                toks.append(Op(c))
                self.i += 1
                self.cmdpos = True
                continue
            m = _REDIRECT.match(s, self.i) if c in "<>&{0123456789" else None
            if m and not (c in "<>" and s.startswith("(", self.i + 1)):
                toks.append(self._redirect(m))
                continue
            before = self.i
            word = self._word()
            if self.i == before:  # never loop on a character no rule consumes
                raise Unreadable(f"unexpected {c!r} at position {before}")
            toks.append(word)
            if self.cmdpos and word.raw == "[[":
                self.in_cond = True
            self.cmdpos = self.cmdpos and (word.raw in _LEADING_KEYWORDS
                                           or bool(_ASSIGNMENT.match(word.text)))
        self._read_heredocs()
        if self.in_cond:
            raise Unreadable("`[[` has no closing `]]`")
        return toks

    def _cond_token(self) -> Word:
        """Inside ``[[ ... ]]`` the operators ``&& || < > ( ) !`` are words of the test."""
        s = self.s
        for op in ("&&", "||", "<", ">", "(", ")"):
            if s.startswith(op, self.i):
                self.i += len(op)
                return Word.literal(op)
        before = self.i
        word = self._word()
        if self.i == before:
            raise Unreadable(f"unexpected {s[self.i]!r} at position {before}")
        if word.raw == "]]":
            self.in_cond = False
            self.cmdpos = False
        return word

    def _arith_command(self) -> Arith | None:
        """``(( expr ))``, or ``None`` when the parentheses are two subshells after all."""
        start = self.i
        self.i += 1  # the outer "(": the inner one starts the balanced part
        inner = self._balanced("(", ")")
        if not self.s.startswith(")", self.i):
            self.i = start  # ((a); (b)): nested subshells, lexed as such
            return None
        self.i += 1
        self.scan_expansions(inner)
        return Arith(inner)

    def _redirect(self, m: re.Match[str]) -> Redir:
        op = m.group(2)
        self.i = m.end()
        self._skip_blanks()
        if self.i >= len(self.s) or self.s[self.i] in "\n;|&()<>":
            raise Unreadable(f"redirection {op!r} has no target")
        target = self._word()
        if op in ("<<", "<<-"):
            doc = Heredoc(target.text, op == "<<-", target.quoted)
            self.pending.append(doc)
            return Redir(op, target, doc, m.group(1) or "")
        return Redir(op, target, fd=m.group(1) or "")

    def _skip_blanks(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def _read_heredocs(self) -> None:
        for doc in self.pending:
            lines: list[str] = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                line = self.s[self.i:] if end < 0 else self.s[self.i:end]
                self.i = len(self.s) if end < 0 else end + 1
                check = line.lstrip("\t") if doc.strip_tabs else line
                if check == doc.delimiter:
                    break
                lines.append(check)
            body = "".join(x + "\n" for x in lines)
            if doc.quoted:
                doc.text = body
            else:
                doc.text, doc.dynamic = self._unquoted_body(body)
        self.pending = []

    def _unquoted_body(self, body: str) -> tuple[str, bool]:
        """An unquoted here-document: ``\\$ \\` \\\\`` are undone and expansions run."""
        out: list[str] = []
        dynamic = False
        i = 0
        while i < len(body):
            c = body[i]
            if c == "\\" and i + 1 < len(body) and body[i + 1] in "$`\\\n":
                if body[i + 1] != "\n":
                    out.append(body[i + 1])
                i += 2
                continue
            if c in "$`":
                sub = Lexer(body, self.on_subst)
                sub.i = i
                text = sub._expansion()
                if text != "$":
                    dynamic = True
                out.append(text)
                i = sub.i
                continue
            out.append(c)
            i += 1
        return "".join(out), dynamic

    # -- words --------------------------------------------------------------
    def _word(self) -> Word:
        s = self.s
        start = self.i
        text: list[str] = []
        mask: list[str] = []
        quoted = procsub = False

        def add(piece: str, kind: str) -> None:
            text.append(piece)
            mask.append(kind * len(piece))

        while self.i < len(s):
            plain = _PLAIN.match(s, self.i)
            if plain:  # a run of characters that mean only themselves
                add(plain.group(), "u")
                self.i = plain.end()
                continue
            c = s[self.i]
            if c in "<>" and s.startswith("(", self.i + 1):
                self.i += 1
                inner = self._balanced("(", ")")
                self.on_subst(inner)
                add(c + "(" + inner + ")", "x")
                procsub = True
                continue
            if c == "(" and text and _ASSIGN_PREFIX.match("".join(text)):
                inner = self._balanced("(", ")")  # an array assignment a=(1 2 3)
                self.scan_expansions(inner)
                add("(" + inner + ")", "x" if ("$" in inner or "`" in inner) else "q")
                continue
            if c in " \t\r\n;|&()<>":
                break
            if c == "\\":
                quoted = True
                if self.i + 1 < len(s):
                    if s[self.i + 1] != "\n":
                        add(s[self.i + 1], "q")
                    self.i += 2
                else:
                    self.i += 1
                continue
            if c == "'":
                quoted = True
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise Unreadable("unterminated single quote")
                add(s[self.i + 1:end], "q")
                self.i = end + 1
                continue
            if c == "$" and s.startswith("$'", self.i):
                quoted = True
                j = self.i + 2
                while j < len(s) and s[j] != "'":
                    j += 2 if s[j] == "\\" else 1
                if j >= len(s):
                    raise Unreadable("unterminated $'...' string")
                add(ansi_c(s[self.i + 2:j]), "q")
                self.i = j + 1
                continue
            if c == "$" and s.startswith('$"', self.i):
                self.i += 1
                c = '"'
            if c == '"':
                quoted = True
                self._double_quoted(add)
                continue
            if c in "$`":
                self._add_expansion(add)
                continue
            add(c, "u")
            self.i += 1
        return Word("".join(text), s[start:self.i], "".join(mask), quoted, procsub)

    def _double_quoted(self, add: Callable[[str, str], None]) -> None:
        s = self.s
        self.i += 1
        while self.i < len(s):
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    add(s[self.i + 1], "q")
                self.i += 2
                continue
            if c in "$`":
                self._add_expansion(add)
                continue
            add(c, "q")
            self.i += 1
        raise Unreadable("unterminated double quote")

    def _add_expansion(self, add: Callable[[str, str], None]) -> None:
        """Read the expansion at ``self.i`` into a word, bare or double-quoted alike: marked
        ``x`` (its value is not known here), but a lone ``$`` (no name, no bracket after it)
        is a literal dollar, marked quoted."""
        piece = self._expansion()
        add(piece, "q" if piece == "$" else "x")

    def _expansion(self) -> str:
        """Read one ``$``-expansion or backtick substitution; commands inside are handed on."""
        s = self.s
        start = self.i
        if s[self.i] == "`":
            end = self.i + 1
            while end < len(s) and s[end] != "`":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise Unreadable("unterminated backtick substitution")
            inner = re.sub(r"\\([$`\\])", r"\1", s[self.i + 1:end])
            self.on_subst(inner)
            self.i = end + 1
            return s[start:self.i]
        if s.startswith("$((", self.i):
            self.i += 1
            inner = self._balanced("(", ")")
            self.scan_expansions(inner)
            return s[start:self.i]
        if s.startswith("$(", self.i):
            self.i += 1
            self.on_subst(self._balanced("(", ")"))
            return s[start:self.i]
        if s.startswith("${", self.i):
            self.i += 1
            self.scan_expansions(self._balanced("{", "}"))
            return s[start:self.i]
        self.i += 1
        m = _NAME.match(s, self.i)
        if m:
            self.i = m.end()
        return s[start:self.i]

    def scan_expansions(self, text: str) -> None:
        """Hand on every command substitution in ``text`` (arithmetic, ``${...}``, array bodies).

        Quotes are not honoured here: a ``$(`` that might run is treated as
        running, which can only make policy ask more, never less.
        """
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == "`" or text.startswith("$(", i) or text.startswith("${", i):
                sub = Lexer(text, self.on_subst)
                sub.i = i
                sub._expansion()
                i = sub.i
                continue
            i += 1

    def _balanced(self, open_: str, close: str) -> str:
        """Text between a bracket at ``self.i`` and its match (quotes respected)."""
        s = self.s
        assert s[self.i] == open_
        depth = 0
        j = self.i
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                k = s.find("'", j + 1)
                if k < 0:
                    raise Unreadable("unterminated single quote")
                j = k + 1
                continue
            if c == '"':
                k = j + 1
                while k < len(s) and s[k] != '"':
                    k += 2 if s[k] == "\\" else 1
                if k >= len(s):
                    raise Unreadable("unterminated double quote")
                j = k + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    inner = s[self.i + 1:j]
                    self.i = j + 1
                    return inner
            j += 1
        raise Unreadable(f"unbalanced {open_!r}")
