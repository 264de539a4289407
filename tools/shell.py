"""The one shell parser: a bash command line as the simple commands it would run.

Used by policy (approval per command, destructive patterns) and by the bash
tool (commands that need a terminal), so both read a command the same way:
``watch ls`` is the wrapper ``watch`` running ``ls`` for both; policy judges
``ls``, the tool refuses ``watch`` because it never exits.

Policy judges bash per command, not per call: ``npm test && rm -rf /`` is two
commands, and the second must be allowed on its own.  This is a deliberately
small, conservative reader of shell syntax, not a shell: whatever it cannot
read with certainty (a program name computed at run time, ``case``, an alias,
a function definition, a script piped into a shell) is reported as
*unparseable*, and policy asks about unparseable commands instead of guessing.

Quoting is undone the way bash would (``r''m`` and ``\\rm`` are ``rm``), so an
obfuscated spelling meets the same rules as the plain one.  Command
substitutions, process substitutions, subshells, brace groups and
``bash -c``/``eval`` strings are read recursively: the commands inside them
run too, so they are parts of the call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

__all__ = ["Parsed", "SimpleCommand", "split_command"]

_MAX_DEPTH = 8
_MAX_CHARS = 100_000

# Words that introduce or close compound syntax and are not programs.
_PREFIX_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"}
_CLOSING_KEYWORDS = {"fi", "done", "}", "esac"}
# Programs that run another program given as their arguments.
_WRAPPERS = {"sudo", "doas", "env", "nice", "nohup", "command", "builtin", "exec", "time",
             "timeout", "stdbuf", "xargs", "setsid", "ionice", "chroot", "unbuffer", "watch",
             "strace", "ltrace", "fakeroot", "busybox"}
# Options of wrappers that take a value as the next word.
_WRAPPER_VALUE_OPTS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"},
    "env": {"-u", "-C", "-S"},
    "nice": {"-n"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "xargs": {"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a"},
    "ionice": {"-c", "-n", "-p"},
    "watch": {"-n", "-d"},
    "strace": {"-e", "-o", "-p", "-s"},
}
_SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "\n")
_STDIN_OPS = {"<", "<<", "<<-", "<<<", "<>", "<&"}
_REDIRECT = re.compile(r"(\d+|&)?(>>|>\||>&|<&|<<<|<<-|<<|<>|>|<)")


@dataclass
class Word:
    """One shell word: its literal value with quoting undone, and whether any of it is computed."""

    text: str  # value with quotes removed; computed pieces kept as written ($X, $(...))
    raw: str
    dynamic: bool = False  # contains $var, $(..), `..`, or an unquoted glob/brace expansion


@dataclass
class SimpleCommand:
    """One command the shell would run: program, arguments, redirections.

    ``program`` is ``None`` for a command that only assigns variables or only
    redirects.  ``wrappers`` lists programs such as ``sudo`` or ``xargs`` that
    were stripped from the front to find the real program.
    """

    program: str | None
    args: list[str] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)  # targets of > >> < etc.
    wrappers: list[str] = field(default_factory=list)
    dynamic_program: bool = False
    dynamic_args: bool = False
    text: str = ""
    stdin_redirected: bool = False  # stdin is a file, here-document, here-string or pipe

    @property
    def subcommand(self) -> str | None:
        """The first word after the program that is not an option (``git status`` -> status)."""
        skip_next = False
        for a in self.args:
            if skip_next:
                skip_next = False
                continue
            if self.program_name == "git" and a in {"-C", "-c", "--git-dir", "--work-tree"}:
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


@dataclass
class Parsed:
    """The simple commands of one command line, or why it could not be read."""

    commands: list[SimpleCommand]
    unparseable: list[str]  # reasons, each naming the piece that could not be read
    functions: list[str] = field(default_factory=list)  # names of shell functions defined


class _Unparseable(Exception):
    pass


class _Lexer:
    """Turns a command string into words and operators, undoing quotes."""

    def __init__(self, src: str, depth: int, out: Parsed) -> None:
        self.s = src
        self.i = 0
        self.depth = depth
        self.out = out
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip_tabs, quoted)

    def tokens(self) -> list[Word | str]:
        toks: list[Word | str] = []
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\n":
                toks.append("\n")
                self.i += 1
                self._read_heredocs()
                continue
            if c in " \t\r":
                self.i += 1
                continue
            if c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
                continue
            op = None if s.startswith("&>", self.i) else next(
                (o for o in _OPERATORS if s.startswith(o, self.i)), None)
            if op is not None and op != "\n":
                toks.append(op)
                self.i += len(op)
                continue
            if c in "()":
                toks.append(c)
                self.i += 1
                continue
            m = _REDIRECT.match(s, self.i)
            if m:
                if c in "<>" and s.startswith("(", self.i + 1):
                    # process substitution <(...) / >(...): its commands run
                    toks.append(self._word())
                    continue
                op = m.group(2)
                self.i = m.end()
                toks.append("REDIR" + op)
                if op in ("<<", "<<-"):
                    while self.i < len(s) and s[self.i] in " \t":
                        self.i += 1
                    delim = self._word()
                    quoted = delim.raw != delim.text or "'" in delim.raw or '"' in delim.raw
                    self.heredocs.append((delim.text, op == "<<-", quoted))
                    toks.append(delim)
                continue
            before = self.i
            toks.append(self._word())
            if self.i == before:  # never loop on a character no rule consumes
                raise _Unparseable(f"unexpected {c!r} at position {before}")
        return toks

    def _read_heredocs(self) -> None:
        for delim, strip, quoted in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                line = self.s[self.i:] if end < 0 else self.s[self.i:end]
                self.i = len(self.s) if end < 0 else end + 1
                check = line.lstrip("\t") if strip else line
                if check == delim:
                    break
                if not quoted and ("$(" in line or "`" in line):
                    raise _Unparseable(f"here-document body runs commands: {line.strip()[:60]!r}")
        self.heredocs = []

    def _word(self) -> Word:
        s = self.s
        start = self.i
        text: list[str] = []
        dynamic = False
        while self.i < len(s):
            c = s[self.i]
            if c in "<>" and s.startswith("(", self.i + 1):
                self.i += 1
                inner = self._balanced("(", ")")
                self._recurse(inner)
                text.append(c + "(" + inner + ")")
                dynamic = True
                continue
            if c in " \t\r\n;|&()<>":
                break
            if c == "\\":
                if self.i + 1 < len(s):
                    if s[self.i + 1] != "\n":
                        text.append(s[self.i + 1])
                    self.i += 2
                else:
                    self.i += 1
                continue
            if c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise _Unparseable("unterminated single quote")
                text.append(s[self.i + 1:end])
                self.i = end + 1
                continue
            if c == '"':
                dynamic |= self._double_quoted(text)
                continue
            if c == "$" and s.startswith("$'", self.i):
                end = s.find("'", self.i + 2)
                if end < 0:
                    raise _Unparseable("unterminated $'...' string")
                body = s[self.i + 2:end]
                if "\\" in body:
                    dynamic = True  # ANSI-C escapes can spell any name: treat as computed
                text.append(body)
                self.i = end + 1
                continue
            if c == "$" or c == "`":
                text.append(self._expansion())
                dynamic = True
                continue
            if c in "*?[":
                dynamic = True  # a glob: the shell decides which words it becomes
            text.append(c)
            self.i += 1
        return Word("".join(text), s[start:self.i], dynamic)

    def _double_quoted(self, text: list[str]) -> bool:
        s = self.s
        self.i += 1
        dynamic = False
        while self.i < len(s):
            c = s[self.i]
            if c == '"':
                self.i += 1
                return dynamic
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    text.append(s[self.i + 1])
                self.i += 2
                continue
            if c == "$" or c == "`":
                text.append(self._expansion())
                dynamic = True
                continue
            text.append(c)
            self.i += 1
        raise _Unparseable("unterminated double quote")

    def _expansion(self) -> str:
        """Read one $-expansion or backtick substitution; commands inside are parsed too."""
        s = self.s
        start = self.i
        if s[self.i] == "`":
            end = self.i + 1
            while end < len(s) and s[end] != "`":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise _Unparseable("unterminated backtick substitution")
            self._recurse(s[self.i + 1:end].replace("\\`", "`"))
            self.i = end + 1
            return s[start:self.i]
        if s.startswith("$((", self.i):
            self.i += 1
            self._balanced("(", ")")
            return s[start:self.i]
        if s.startswith("$(", self.i):
            self.i += 1
            inner = self._balanced("(", ")")
            self._recurse(inner)
            return s[start:self.i]
        if s.startswith("${", self.i):
            self.i += 1
            inner = self._balanced("{", "}")
            if "$(" in inner or "`" in inner:
                self._recurse(inner)
            return s[start:self.i]
        self.i += 1
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]").match(s, self.i)
        if m:
            self.i = m.end()
        return s[start:self.i]

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
                    raise _Unparseable("unterminated single quote")
                j = k + 1
                continue
            if c == '"':
                k = j + 1
                while k < len(s) and s[k] != '"':
                    k += 2 if s[k] == "\\" else 1
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
        raise _Unparseable(f"unbalanced {open_!r}")

    def _recurse(self, inner: str) -> None:
        _parse_into(inner, self.depth + 1, self.out)


def _strip_wrappers(words: list[Word], cmd: SimpleCommand, depth: int, out: Parsed) -> list[Word]:
    """Remove sudo/env/xargs/... from the front so the real program is judged."""
    while words:
        name = os.path.basename(words[0].text)
        if words[0].dynamic or name not in _WRAPPERS:
            break
        if name == "busybox" and len(words) > 1:
            cmd.wrappers.append(name)
            words = words[1:]
            continue
        cmd.wrappers.append(name)
        value_opts = _WRAPPER_VALUE_OPTS.get(name, set())
        rest = words[1:]
        while rest:
            w = rest[0].text
            if w == "--":
                rest = rest[1:]
                break
            if w.startswith("-"):
                rest = rest[2:] if w in value_opts else rest[1:]
                continue
            if name == "env" and _ASSIGNMENT.match(w):
                rest = rest[1:]
                continue
            if name == "timeout" and re.fullmatch(r"[0-9.]+[smhd]?", w):
                rest = rest[1:]
                break
            if name == "watch":
                # watch runs its arguments through sh -c
                _parse_into(" ".join(x.text for x in rest), depth + 1, out)
                return []
            break
        words = rest
    return words


def _finish(words: list[Word], redirects: list[Word], depth: int, out: Parsed,
            stdin: bool = False) -> None:
    if not words and not redirects:
        return
    cmd = SimpleCommand(program=None, stdin_redirected=stdin)
    # leading assignments: VAR=value cmd ...
    while words and _ASSIGNMENT.match(words[0].text) and not words[0].text.startswith("="):
        words = words[1:]
    while words and words[0].text in _PREFIX_KEYWORDS and not words[0].dynamic:
        words = words[1:]
    words = _strip_wrappers(words, cmd, depth, out)
    cmd.redirects = [r.text for r in redirects]
    if not words:
        if cmd.wrappers or redirects:
            cmd.text = " ".join(cmd.wrappers + [">" + r for r in cmd.redirects])
            out.commands.append(cmd)
        return
    head = words[0]
    if head.text in _CLOSING_KEYWORDS and not head.dynamic:
        words = words[1:]
        if not words:
            return
        head = words[0]
    if head.text == "case" and not head.dynamic:
        raise _Unparseable("`case` statements are not read by policy")
    if head.text in ("for", "select") and not head.dynamic:
        # for NAME in WORDS: the header runs nothing; the body follows `do`
        return
    cmd.program = head.text
    cmd.dynamic_program = head.dynamic
    cmd.args = [w.text for w in words[1:]]
    cmd.dynamic_args = any(w.dynamic for w in words[1:]) or any(r.dynamic for r in redirects)
    cmd.text = " ".join(cmd.wrappers + [w.text for w in words]
                        + [">" + r for r in cmd.redirects])
    out.commands.append(cmd)
    name = cmd.program_name
    if head.dynamic:
        out.unparseable.append(
            f"the program name {head.raw!r} is computed at run time (a variable or command "
            "substitution), so policy cannot tell what would run")
    elif name in ("eval", "source", ".") or (name in _SHELLS and "-c" in cmd.args):
        script_words = words[1:]
        if name in _SHELLS:
            idx = cmd.args.index("-c")
            script_words = words[1 + idx + 1: 2 + idx + 1]
        if name in ("source", "."):
            out.unparseable.append(f"`{name}` runs a script file policy cannot see")
        elif any(w.dynamic for w in script_words):
            out.unparseable.append(f"`{name}` runs a string computed at run time")
        else:
            _parse_into(" ".join(w.text for w in script_words), depth + 1, out)
    elif name in ("alias", "unalias", "enable", "hash"):
        out.unparseable.append(f"`{name}` changes what command names mean")


def _parse_into(src: str, depth: int, out: Parsed) -> None:
    if depth > _MAX_DEPTH:
        raise _Unparseable(f"nested more than {_MAX_DEPTH} levels deep")
    toks = _Lexer(src, depth, out).tokens()
    words: list[Word] = []
    redirects: list[Word] = []
    stdin = False
    i = 0
    while i < len(toks):
        t = toks[i]
        if isinstance(t, Word):
            words.append(t)
        elif t.startswith("REDIR"):
            op = t[5:]
            if op in _STDIN_OPS:
                stdin = True
            if i + 1 < len(toks) and isinstance(toks[i + 1], Word):
                target = toks[i + 1]
                assert isinstance(target, Word)
                if op not in ("<<", "<<-", "<<<", ">&", "<&") or (
                        op == ">&" and not target.text.isdigit()):
                    redirects.append(target)
                i += 1
            else:
                raise _Unparseable(f"redirection {op!r} has no target")
        elif t == "(":
            if words and i + 1 < len(toks) and toks[i + 1] == ")":
                name = words[-1].text
                out.functions.append(name)
                out.unparseable.append(
                    f"defines a shell function {name!r}; functions can stand in for any command")
                words = words[:-1]
                i += 2
                continue
            _finish(words, redirects, depth, out, stdin)
            words, redirects, stdin = [], [], False
        else:  # an operator or ")"
            if t == ";;":
                raise _Unparseable("`case` statements are not read by policy")
            _finish(words, redirects, depth, out, stdin)
            words, redirects, stdin = [], [], False
            if t in ("|", "|&"):
                _mark_pipe_target(toks, i + 1, out)
                stdin = True  # the next command reads the pipe
        i += 1
    _finish(words, redirects, depth, out, stdin)


def _mark_pipe_target(toks: list[Word | str], j: int, out: Parsed) -> None:
    """A shell reading its script from a pipe (``... | sh``) runs text policy never saw."""
    words = [t for t in toks[j:j + 4] if isinstance(t, Word)]
    names = [os.path.basename(w.text) for w in words]
    while names and names[0] in _WRAPPERS:
        names = names[1:]
    if names and names[0] in _SHELLS | {"python", "python3", "perl", "ruby", "node"}:
        rest = names[1:2]
        if not rest or rest[0].startswith("-") and rest[0] not in ("-c", "-e"):
            out.unparseable.append(f"pipes a script into `{names[0]}`, which policy cannot read")


def split_command(command: str) -> Parsed:
    """Every simple command in ``command``, with reasons for anything unreadable."""
    out = Parsed(commands=[], unparseable=[])
    if len(command) > _MAX_CHARS:
        out.unparseable.append(f"the command is {len(command)} characters long; policy reads at "
                               f"most {_MAX_CHARS}")
        return out
    if "\x00" in command:
        out.unparseable.append("the command contains a NUL byte")
        return out
    try:
        _parse_into(command, 0, out)
    except _Unparseable as exc:
        out.unparseable.append(str(exc))
    except RecursionError:
        out.unparseable.append("the command is nested too deeply to read")
    return out
