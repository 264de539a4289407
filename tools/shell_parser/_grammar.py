"""Tokens to simple commands: lists, pipelines, compound commands, ``case``, functions.

This is a deliberately small reader of shell grammar, not a shell: it finds
every simple command a line can run (in any branch, loop body or function
body, since any of them may run) and hands each to :func:`resolve`.
"""

from __future__ import annotations

import re

from tools.shell_parser._brace import brace_expand
from tools.shell_parser._ctx import Ctx, Io, Stdin
from tools.shell_parser._lexer import Arith, Lexer, Op, Redir, Token, Unreadable
from tools.shell_parser._model import MAX_DEPTH, Word
from tools.shell_parser._routes import resolve

_LEADING = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "coproc"}
_CLOSING = {"fi", "done", "}", "esac"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]*$")
_STDIN_OPS = {"<", "<<", "<<-", "<<<", "<>", "<&"}
_WRITE_OPS = {">", ">>", ">|", "&>", "&>>", "<>"}


def parse_script(src: str, ctx: Ctx) -> None:
    """Read shell text and judge every command in it, at ``ctx``'s depth and route."""
    if ctx.depth > MAX_DEPTH:
        raise Unreadable(f"code nested more than {MAX_DEPTH} levels deep")
    toks = Lexer(src, lambda inner: parse_script(inner, ctx.via("a command substitution"))).tokens()
    _Grammar(toks, ctx).run()


def resolve_words(words: list[Word], ctx: Ctx, computed: bool) -> None:
    """Judge a command given as words (a route's argv), with no redirections of its own."""
    resolve(words, [], Io(), ctx, computed)


class _Cmd:
    def __init__(self) -> None:
        self.words: list[Word] = []
        self.assigns: list[Word] = []
        self.io = Io()

    @property
    def empty(self) -> bool:
        return not self.words and not self.assigns and not self.io.targets and self.io.stdin is None


class _Grammar:
    def __init__(self, toks: list[Token], ctx: Ctx) -> None:
        self.toks = toks
        self.ctx = ctx
        self.cur = _Cmd()
        self.case: list[str] = []  # per open case: "head", "pattern" or "body"
        self.header = False  # inside a for/select header
        self.pipe_from = ""  # the command piping into the next one

    def run(self) -> None:
        i = 0
        toks = self.toks
        while i < len(toks):
            t = toks[i]
            if self.case and self.case[-1] in ("head", "pattern") and not (
                    isinstance(t, Word) and t.raw == "esac" and self.case[-1] == "pattern"):
                self._case_step(t)
                i += 1
                continue
            if isinstance(t, Word):
                i = self._word(i, t)
                continue
            if isinstance(t, Redir):
                self._redirect(t)
            elif isinstance(t, Arith):
                pass  # (( ... )): its substitutions were read by the lexer
            elif t.op == "(" and len(self.cur.words) == 1 and not self.cur.assigns \
                    and i + 1 < len(toks) and isinstance(toks[i + 1], Op) \
                    and toks[i + 1].op == ")":  # type: ignore[union-attr]
                self._function(self.cur.words[0].text)
                self.cur = _Cmd()
                i += 2
                continue
            else:
                self._operator(t.op)
            i += 1
        self._finish()
        if self.case:
            raise Unreadable("`case` without `esac`")

    def _case_step(self, t: Token) -> None:
        if self.case[-1] == "head":
            if isinstance(t, Word) and t.raw == "in":
                self.case[-1] = "pattern"
            return
        if isinstance(t, Op) and t.op == ")":
            self.case[-1] = "body"

    def _word(self, i: int, t: Word) -> int:
        cur = self.cur
        if self.header:
            if t.raw == "do":
                self.header = False
            return i + 1
        if not cur.words:
            if t.raw in ("for", "select"):
                self.header = True
                return i + 1
            if t.raw == "case":
                self.case.append("head")
                return i + 1
            if t.raw == "esac" and self.case:
                self._finish()
                self.case.pop()
                return i + 1
            if t.raw == "function":
                toks = self.toks
                if i + 1 < len(toks) and isinstance(toks[i + 1], Word):
                    self._function(toks[i + 1].text)  # type: ignore[union-attr]
                    i += 2
                    if i + 1 < len(toks) and isinstance(toks[i], Op) and toks[i].op == "(":  # type: ignore[union-attr]
                        i += 2
                    return i
            if t.raw in _LEADING or t.raw in _CLOSING:
                if t.raw == "coproc" and i + 2 < len(self.toks) and isinstance(self.toks[i + 1], Word) \
                        and _NAME.match(self.toks[i + 1].text) and (  # type: ignore[union-attr]
                        isinstance(self.toks[i + 2], Op) or (isinstance(self.toks[i + 2], Word)
                                                             and self.toks[i + 2].raw == "{")):  # type: ignore[union-attr]
                    return i + 2  # coproc NAME { ...; }
                if t.raw == "time" and i + 1 < len(self.toks) and isinstance(self.toks[i + 1], Word) \
                        and self.toks[i + 1].text == "-p":  # type: ignore[union-attr]
                    return i + 2
                return i + 1
            if _ASSIGNMENT.match(t.text) and not t.text.startswith("="):
                cur.assigns.append(t)
                return i + 1
        cur.words.append(t)
        return i + 1

    def _function(self, name: str) -> None:
        self.ctx.out.functions.append(name)

    def _redirect(self, r: Redir) -> None:
        io = self.cur.io
        op = r.op
        if op in ("<<", "<<-"):
            io.stdin = Stdin("heredoc", doc=r.heredoc)
            if r.heredoc is not None:
                io.shown.append(r.fd + op + r.heredoc.delimiter)
            return
        target = r.target
        assert target is not None
        if op == "<<<":
            io.stdin = Stdin("herestring", word=target)
            io.shown.append(r.fd + op + target.text)
            return
        if op in (">&", "<&") and (target.text.isdigit() or target.text in ("-", "")):
            if op == "<&" and target.text == "0":
                return
            if op == "<&":
                io.stdin = Stdin("fd", word=target)
            return
        io.targets.append(target)
        io.shown.append(r.fd + op + target.text)  # `>>` stays an append, `<` a read, when re-printed
        if op in _STDIN_OPS:
            io.stdin = Stdin("procsub" if target.procsub else "file", word=target)
        if op in _WRITE_OPS or op == ">&":
            io.writes.append(target.text)

    def _operator(self, op: str) -> None:
        if op == ";;" or op == ";&" or op == ";;&":
            if not self.case or self.case[-1] != "body":
                raise Unreadable(f"{op!r} outside a `case` statement")
            self._finish()
            self.case[-1] = "pattern"
            return
        piped = op in ("|", "|&")
        text = " ".join(w.text for w in self.cur.words)
        self._finish()
        if piped:
            self.cur.io.stdin = Stdin("pipe", source=text or "a compound command")
        if op == "\n" and self.header:
            self.header = False

    def _finish(self) -> None:
        cur, self.cur = self.cur, _Cmd()
        if cur.empty:
            return
        if not cur.words:
            resolve([], cur.assigns, cur.io, self.ctx)
            return
        words = [x for w in cur.words for x in brace_expand(w)]
        resolve(words, cur.assigns, cur.io, self.ctx)

