"""Programs that run code they are given: shells, ``eval``, interpreters, and tools with a way
to run commands (``find -exec``, sed's ``e``, awk's ``system``, ``rg --pre``, git, make, vim ...).

Each handler finds the code a command runs and hands it on: shell text to be
read with the same rules (``ctx.script``), a command given as words to be
judged as a command (``ctx.command``), or code policy cannot judge
(``ctx.opaque``).  A file named as a script (``bash x.sh``, ``python x.py``,
``source env.sh``) is a program like any other: policy judges the command
line, not the contents of the files it names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.shell_parser._assign import check_assignments
from tools.shell_parser._awk import awk_runs
from tools.shell_parser._ctx import Ctx, Io
from tools.shell_parser._git import git_routes
from tools.shell_parser._lexer import Lexer
from tools.shell_parser._model import Word
from tools.shell_parser._options import (
    Opts,
    Scan,
    option_values,
    opts,
    scan_options,
    scan_with,
)
from tools.shell_parser._sed import SedUnreadable, sed_execs

Handler = Callable[[list[Word], Io, Ctx, list[Word]], None]

SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh", "lksh",
          "oksh", "pdksh", "rbash", "fish", "csh", "tcsh"}
_KSH = {"ksh", "ksh93", "mksh", "lksh", "oksh", "pdksh"}
_STDIN_FILES = {"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"}


def _placeholder(w: Word) -> str:
    """A word's text with computed pieces replaced by ``x``: data in a data position."""
    return "".join("x" if k == "x" else c for c, k in zip(w.text, w.mask, strict=True))


def _stdin_script(name: str, io: Io, ctx: Ctx, lang: str | None = None) -> None:
    """A program reading its script from standard input: judge it if it is written here."""
    if io.stdin is None or io.stdin.kind == "file":
        return  # the terminal (nothing, in the sandbox) or a file: a program like any other
    text, desc = io.stdin.text()
    if text is not None and lang is None:
        ctx.script(text, f"{desc} fed to {name}")
    elif text is not None:
        ctx.opaque(f"{name} ({lang} code from {desc})", text)
    else:
        ctx.opaque(f"{name} reading {'a script' if lang is None else lang + ' code'} from {desc}")


# -- shells -------------------------------------------------------------------
def _shell(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """``bash [options] [-c SCRIPT | FILE | (stdin)] [ARG]...`` with options spelled any way bash
    takes them: bundled (``-lc``, ``-ec``, ``+c``), ``-o NAME``/``-O NAME`` taking the next word
    (``-eo pipefail -c``), long options first, ``-``/``--`` ending them."""
    name = os.path.basename(words[0].text)
    want_c = None
    stdin = False  # -s: the script comes from stdin, the operands are its arguments
    i = 1
    while i < len(words):
        w = words[i]
        t = w.text
        if t in ("-", "--"):
            i += 1
            break
        if not t.startswith(("-", "+")) or len(t) < 2:
            break
        if w.dynamic:
            ctx.out.add_unparseable(f"{name}'s option {w.raw!r} is computed at run time, so "
                                    "policy cannot tell whether it runs a script")
            return
        if t.startswith("--"):
            i += 2 if t in ("--rcfile", "--init-file") else 1
            if t in ("--command",) and name == "fish":
                want_c = t
                break
            if t.startswith("--command=") and name == "fish":
                ctx.script(Word(t[10:], t[10:], w.mask[10:]), "the script of fish --command")
                return
            continue
        cluster = t[1:]
        consumed = 0
        for k, ch in enumerate(cluster):
            if ch == "c":
                want_c = t
            elif ch == "s" and t[0] == "-":
                stdin = True
            elif ch in "oO" and ch == "o" or (ch == "O" and name == "bash"):
                rest = cluster[k + 1:]
                if rest and (name == "zsh" or name in _KSH):
                    break  # zsh: -oNAME; ksh: -o with letters after it takes no word
                consumed += 1
            elif ch == "b" and name == "zsh":
                i += 1 + consumed
                return _shell_operands(name, words[i:], want_c, stdin, io, ctx)
        i += 1 + consumed
    _shell_operands(name, words[i:], want_c, stdin, io, ctx)


def _shell_operands(name: str, operands: list[Word], want_c: str | None, stdin: bool, io: Io,
                    ctx: Ctx) -> None:
    if want_c is not None:
        if operands:
            ctx.script(operands[0], f"the script of {name} {want_c}")
        return
    if operands and not stdin:
        first = operands[0]
        if first.procsub:
            ctx.opaque(f"{name} running {first.raw[:60]} as its script")
        elif first.text in _STDIN_FILES:
            _stdin_script(name, io, ctx)
        return
    _stdin_script(name, io, ctx)


def _eval(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    args = words[1:]
    if args[:1] and args[0].text == "--":
        args = args[1:]
    if not args:
        return
    if any(w.dynamic for w in args):
        ctx.out.add_unparseable("`eval` runs a string computed at run time ("
                                + " ".join(w.raw for w in args)[:80] + ")")
        return
    ctx.script(" ".join(w.text for w in args), "the string eval runs")


def _source(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    name = words[0].text
    args = words[1:]
    if args[:1] and args[0].text == "--":
        args = args[1:]
    if not args:
        return
    if args[0].procsub:
        ctx.opaque(f"`{name}` running the output of {args[0].raw[:60]} as a script")
    elif args[0].text in _STDIN_FILES:
        _stdin_script(name, io, ctx)


def _trap(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    args = words[1:]
    if args[:1] and args[0].text == "--":
        args = args[1:]
    if len(args) < 2 or args[0].text.startswith("-") and args[0].text != "-" and len(args[0].text) > 1:
        return  # trap -l, trap -p, trap SIG (a reset)
    if args[0].text not in ("", "-"):
        ctx.script(args[0], "the trap handler")


def _mapfile(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    sc = scan_options(words, opts("-d -n -O -s -u -C -c", "-t"), 1)
    for cb in sc.get("-C"):
        ctx.script(cb, f"the callback of {words[0].text} -C")


def _alias(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    for w in words[1:]:
        name, eq, _ = w.text.partition("=")
        if eq:
            off = len(name) + 1
            ctx.script(Word(w.text[off:], w.raw, w.mask[off:]), f"the alias {name}")


_SUBSCRIPT_CODE = re.compile(r"\[[^\]]*(\$\(|`)")


def _declare(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    check_assignments([w for w in words[1:] if "=" in w.text and not w.text.startswith("-")], ctx)
    _subscripts(words, _io, ctx, _assigns)


def _subscripts(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """bash evaluates ``a[...]`` subscripts given to these builtins, command substitutions too."""
    for w in words[1:]:
        if _SUBSCRIPT_CODE.search(w.text) and "x" not in w.mask:
            ctx.out.add_unparseable(f"{words[0].text} evaluates the array subscript in {w.raw[:60]!r} "
                                    "as arithmetic, and it holds a command substitution")


# -- interpreters -------------------------------------------------------------
@dataclass(frozen=True)
class Interp:
    """An interpreter's command line: which options carry inline code, which take a value."""

    lang: str
    code: frozenset[str]  # options whose value is code to run (-c, -e, --eval)
    opts: Opts  # all options, code options among the values
    ends: frozenset[str] = frozenset()  # after this option the rest are its arguments (-m)
    stdin: bool = True  # no script operand: the code is read from stdin


def _interp(lang: str, code: str, values: str = "", flags: str | None = None, stops: str = "",
            ends: str = "", optional: str = "", cluster: bool = True, stdin: bool = True) -> Interp:
    return Interp(lang, frozenset(code.split()),
                  opts(f"{code} {values} {ends}", flags, stops + " --help --version", optional,
                       cluster=cluster),
                  frozenset(ends.split()), stdin)


_PYTHON = _interp("Python", "-c", "-W -X --check-hash-based-pycs -Q", stops="-V -h -?",
                  ends="-m")
INTERPRETERS: dict[str, Interp] = {
    "python": _PYTHON,
    "perl": _interp("Perl", "-e -E", "-I -M -m -F -x -d -D -C -l -0 -i", stops="-v -V -h",
                    optional="-i"),
    "ruby": _interp("Ruby", "-e", "-r -I -C -E -F -x -W -0 -K -T --disable --enable",
                    stops="-v -h", optional="-i"),
    "node": _interp("JavaScript", "-e --eval -p --print", "-r --require --import --input-type "
                    "--loader --experimental-loader -C --conditions --title", stops="-v -h -c --check"),
    "bun": _interp("JavaScript", "-e --eval -p --print", "-r --preload --cwd", stops="-v -h"),
    "php": _interp("PHP", "-r -B -R -E", "-d -c -z -t -S -F -f", stops="-v -h -i -m -l",
                   cluster=False),
    "lua": _interp("Lua", "-e", "-l -j -O", stops="-v"),
    "Rscript": _interp("R", "-e", "--default-packages", stops=""),
    "R": _interp("R", "-e", "-f --file -d --debugger", stops=""),
    "julia": _interp("Julia", "-e --eval -E --print", "-L --load -J --sysimage -p --procs -t "
                     "--threads -C --cpu-target -O --optimize", stops="-v -h"),
    "tclsh": _interp("Tcl", ""), "wish": _interp("Tcl", ""),
    "expect": _interp("Tcl", "-c", "-f", stops="-v"),
    "osascript": _interp("AppleScript", "-e", "-l -s", stdin=False),
    "pwsh": _interp("PowerShell", "-c -Command -command -e -ec -enc -EncodedCommand "
                    "-encodedcommand", "-f -File -file -ExecutionPolicy -executionpolicy",
                    cluster=False),
    "gdb": _interp("gdb", "-ex --eval-command -iex --init-eval-command", "-x --command -p --pid "
                   "-cd --directory -s --symbols -e --exec -se -c --core", cluster=False,
                   stdin=False),
    "jrunscript": _interp("JavaScript", "-e", "-cp -classpath -l -f", stdin=False),
    "jjs": _interp("JavaScript", "", "-cp -classpath"),
    "emacs": _interp("Emacs Lisp", "--eval -eval --execute", "-l --load -f --funcall -L "
                     "--directory --insert --chdir -t --terminal", cluster=False, stdin=False),
}
_ALIASES = {"nodejs": "node", "luajit": "lua", "powershell": "pwsh", "ruby3": "ruby",
            "perl5": "perl", "emacsclient": "emacs"}
_PYTHON_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?([dmu]*)$")


def interpreter(name: str) -> Interp | None:
    if _PYTHON_NAME.match(name):
        return _PYTHON
    if re.match(r"^perl\d+(\.\d+)*$", name):
        return INTERPRETERS["perl"]
    return INTERPRETERS.get(_ALIASES.get(name, name))


def _interpreter(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    name = os.path.basename(words[0].text)
    spec = interpreter(name)
    assert spec is not None
    sc = _perlish(words, spec) if spec.lang in ("Perl", "Ruby") else scan_options(words, spec.opts, 1)
    code = [w for o, w in sc.values if o in spec.code]
    if code:
        for w in code:
            ctx.opaque(f"{name} {_first_code_option(sc.values, spec)} ({spec.lang} code)",
                       _placeholder(w))
        return
    if sc.stopped is not None or any(o in spec.ends for o, _ in sc.values):
        return
    if sc.unknown is not None and sc.operand < len(words) and words[sc.operand].dynamic:
        # -$FLAGS: the options end at a word computed at run time, which may be -e CODE
        ctx.opaque(f"{name} given the computed option {sc.unknown[:40]} (it may be "
                   f"{spec.lang} code)", sc.unknown)
        return
    operands = words[sc.operand:]
    if operands:
        first = operands[0]
        if first.procsub:
            ctx.opaque(f"{name} running the output of {first.raw[:60]} as {spec.lang} code")
        elif first.text in _STDIN_FILES:
            _stdin_script(name, io, ctx, spec.lang)
        return
    if spec.stdin:
        _stdin_script(name, io, ctx, spec.lang)


# Perl and Ruby switches: what each letter does with the rest of its cluster.
_PERLISH_REST = {"Perl": "iMmFxdD", "Ruby": "iFxWKT"}  # takes the rest of the cluster
_PERLISH_NEXT = {"Perl": "eEI", "Ruby": "erICE"}  # takes the rest, or else the next word
_PERLISH_DIGITS = {"Perl": "l0C", "Ruby": "0"}  # takes digits only


def _perlish(words: list[Word], spec: Interp) -> Scan:
    """perl/ruby switches bundle with rules of their own: ``-lane``, ``-pi.bak``, ``-0777``.

    Their grammar only: where the switches end (``--``, an operand, a computed ``-$FLAGS``)
    is the one option loop's answer (:func:`scan_with`), as for every other program.
    """
    return scan_with(words, 1, lambda ws, i, out: _perl_switches(ws, i, out, spec.lang))


def _perl_switches(words: list[Word], i: int, out: Scan, lang: str) -> int | None:
    """One perl/ruby switch word: how many words it takes, or None at ``-v``/``-h``/``--help``."""
    w = words[i]
    t = w.text
    if t.startswith("--"):
        if t in ("--version", "--help"):
            out.stop(t)
            return None
        return 1
    j = 1
    while j < len(t):
        ch = t[j]
        if (lang == "Perl" and ch in "vhV") or (lang == "Ruby" and ch == "h"):
            out.stop("-" + ch)
            return None
        if ch in _PERLISH_NEXT[lang]:
            rest = t[j + 1:]
            if rest:
                out.values.append(("-" + ch, Word(rest, rest, w.mask[j + 1:])))
            elif i + 1 < len(words):
                out.values.append(("-" + ch, words[i + 1]))
                return 2
            return 1
        if ch in _PERLISH_REST[lang]:
            return 1
        if ch in _PERLISH_DIGITS[lang]:
            j += 1
            while j < len(t) and t[j] in "0123456789abcdefABCDEFx":
                j += 1
            continue
        j += 1
    return 1


def _first_code_option(values: list[tuple[str, Word]], spec: Interp) -> str:
    return next(o for o, _ in values if o in spec.code)


def _deno(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    sc = scan_options(words, opts(flags=None), 1)
    if sc.operand >= len(words):
        return
    sub = words[sc.operand].text
    rest = words[sc.operand + 1:]
    if sub == "eval":
        inner = scan_options(rest, opts(flags=None), 0)
        if inner.operand < len(rest):
            ctx.opaque("deno eval (JavaScript code)", _placeholder(rest[inner.operand]))
    elif sub == "run":
        inner = scan_options(rest, opts(flags=None), 0)
        if inner.operand < len(rest) and rest[inner.operand].text in _STDIN_FILES:
            _stdin_script("deno run", io, ctx, "JavaScript")


# -- tools that run commands ----------------------------------------------------
_FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}


def _find(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """``find ... -exec CMD {} ;`` runs CMD (as words, no shell) for every file it finds."""
    k = 1
    while k < len(words):
        t = words[k].text
        if t not in _FIND_EXEC:
            k += 1
            continue
        cmd: list[Word] = []
        j = k + 1
        while j < len(words):
            u = words[j].text
            if u == ";" or (u == "+" and cmd and cmd[-1].text.endswith("{}")):
                break
            cmd.append(words[j].computed_where("{}"))
            j += 1
        ctx.command(cmd, f"the command of find {t}", computed=True)
        k = j + 1


_SED = opts("-e --expression -f --file -l --line-length", "-n --quiet --silent -E -r "
            "--regexp-extended -s --separate -u --unbuffered -z --null-data --posix --debug "
            "--sandbox --follow-symlinks -b --binary", "--help --version", "-i --in-place")


def _sed(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """sed's ``e`` command and ``s///e`` flag run commands; the rest of sed does not."""
    scripts: list[Word] = []
    operands: list[Word] = []
    files: list[Word] = []
    sandbox = False
    k = 1
    while k < len(words):  # GNU sed takes options anywhere, so read them all
        w = words[k]
        t = w.text
        k += 1
        if t == "--":
            operands += words[k:]
            break
        if t.startswith("--"):
            written, eq, val = t.partition("=")
            name = _SED.long_name(written)  # --expr is --expression
            if name in ("--help", "--version"):
                return
            sandbox |= name == "--sandbox"
            if name in _SED.values:
                value = Word(val, val, w.mask[len(t) - len(val):]) if eq else (
                    words[k] if k < len(words) else None)
                k += 0 if eq else 1
                if value is not None and name != "--line-length":
                    (scripts if name == "--expression" else files).append(value)
            continue
        if t.startswith("-") and len(t) > 1:
            for j in range(1, len(t)):
                ch = t[j]
                if ch in "efl":
                    rest = t[j + 1:]
                    value = Word(rest, rest, w.mask[j + 1:]) if rest else (
                        words[k] if k < len(words) else None)
                    k += 0 if rest else 1
                    if value is not None and ch != "l":
                        (scripts if ch == "e" else files).append(value)
                    break
                if ch == "i":
                    break  # -i[SUFFIX]: the rest is the suffix
            continue
        operands.append(w)
    if not scripts and not files and operands:
        scripts = [operands[0]]
    if sandbox:
        return
    scripts += _programs_from_stdin("sed", files, io, ctx)
    for w in scripts:
        text = _placeholder(w)
        try:
            runs = sed_execs(text)
        except SedUnreadable as exc:
            ctx.opaque(f"a sed script policy cannot read ({exc})", text)
            continue
        for command in runs:
            if command is None:
                ctx.opaque("sed's e (runs text from its input as a command)", text)
            else:
                ctx.script(command, "the e command of sed")


def _programs_from_stdin(name: str, files: list[Word], io: Io, ctx: Ctx) -> list[Word]:
    """A program file that is standard input (``awk -f /dev/stdin <<< '...'``): its text, when
    the command line holds it; otherwise code policy cannot see, recorded as opaque."""
    if not any(f.text in _STDIN_FILES for f in files):
        return []  # files on disk: judged as the program's own files are (docs/policy.md)
    if io.stdin is None:
        return []
    text, desc = io.stdin.text()
    if text is None:
        ctx.opaque(f"{name} reading its program from {desc}")
        return []
    return [Word.literal(text)]


_AWK = opts("-F --field-separator -v --assign -f --file -e --source -i --include -l --load -E "
            "--exec -W", None, "--help --version -V", "-d --dump-variables -o --pretty-print "
            "-p --profile -L --lint -D --debug")


def _awk(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    sc = scan_options(words, _AWK, 1)
    if sc.stopped is not None:
        return
    programs = sc.get("-e", "--source")
    if not programs and not sc.has("-f", "--file", "-E", "--exec") and sc.operand < len(words):
        programs = [words[sc.operand]]
    name = os.path.basename(words[0].text)
    programs += _programs_from_stdin(name, sc.get("-f", "--file", "-E", "--exec"), io, ctx)
    for w in programs:
        runs = awk_runs(_placeholder(w))
        for command in runs.literal:
            ctx.script(command, f"a command {name} runs")
        for command in runs.fed or []:
            first = command.split()[0] if command.split() else ""
            if os.path.basename(first) in SHELLS or interpreter(os.path.basename(first)):
                ctx.opaque(f"{name} piping text it computes into {first}", _placeholder(w))
            else:
                ctx.script(command, f"a command {name} pipes its output into")
        if runs.computed:
            ctx.opaque(f"{name} running a command its program computes", _placeholder(w))


def _rg(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """``rg --pre CMD`` runs CMD on every file searched; ``--hostname-bin`` runs a program."""
    for k, w in enumerate(words[1:], start=1):
        t = w.text
        if t == "--":
            break
        for opt in ("--pre", "--hostname-bin"):
            value = None
            if t == opt and k + 1 < len(words):
                value = words[k + 1]
            elif t.startswith(opt + "="):
                off = len(opt) + 1
                value = Word(t[off:], w.raw, w.mask[off:])
            if value is not None and value.text:
                ctx.command([value, Word("FILE", "FILE", "xxxx")], f"the program of rg {opt}",
                            computed=True)


def _make(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """make runs its makefile (a file); ``--eval`` and a makefile read from stdin are code here."""
    for name, value in option_values(words, ("--eval", "-E")):
        ctx.opaque(f"make {name} (make code; $(shell ...) and recipes run commands)",
                   _placeholder(value))
    if any(value.text in _STDIN_FILES
           for _, value in option_values(words, ("-f", "--file", "--makefile"))):
        _stdin_script("make", io, ctx, "make")


def _cmake(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    if len(words) > 2 and words[1].text == "-P":
        return  # a script file
    for k, w in enumerate(words):
        if w.text in ("-D",) and k + 1 < len(words) and "CMAKE_" in words[k + 1].text \
                and "LAUNCHER" in words[k + 1].text:
            ctx.command([Word(words[k + 1].text.partition("=")[2],
                              words[k + 1].raw, "q" * len(words[k + 1].text.partition("=")[2]))],
                        "a compiler launcher cmake sets")


_VIM = {"vim", "vi", "nvim", "view", "gvim", "vimdiff", "evim", "rvim", "rview", "ex", "nex"}


def _vim(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """vim ``-c CMD``, ``--cmd CMD`` and ``+CMD`` run Ex commands (``:!`` runs a shell)."""
    name = os.path.basename(words[0].text)
    silent_ex = name in ("ex", "nex")
    for k, w in enumerate(words[1:], start=1):
        t = w.text
        if t in ("-c", "--cmd") and k + 1 < len(words):
            ctx.opaque(f"{name} {t} (Vim commands)", words[k + 1].text)
        elif t.startswith("+") and len(t) > 1 and not t[1:].isdigit() and not t.startswith("+/"):
            ctx.opaque(f"{name} {t[:1]}CMD (Vim commands)", t[1:])
        elif t in ("-e", "-es", "-E", "-s") and t != "-s":
            silent_ex = True
    if silent_ex and io.stdin is not None and io.stdin.kind != "file":
        _stdin_script(name, io, ctx, "Vim Ex")


def _ed(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """ed reads its commands from stdin; ``!`` among them runs a shell command."""
    if io.stdin is None or io.stdin.kind == "file":
        return
    text, desc = io.stdin.text()
    if text is None:
        ctx.opaque(f"{words[0].text} reading its commands from {desc}")
    elif re.search(r"(^|\n)\s*([^\n]*[rwe]\s*)?!", text):
        ctx.opaque(f"{words[0].text} commands with a ! shell escape", text)


def _pager(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    name = os.path.basename(words[0].text)
    for w in words[1:]:
        t = w.text
        if name in ("less", "more", "most") and t.startswith("+") and "!" in t:
            ctx.script(t[t.index("!") + 1:], f"the ! command of {name} +")
    if name == "man":
        for option, value in option_values(words, ("-P", "--pager")):
            ctx.script(value, f"the pager of man {option}")


_DB_ESCAPE = re.compile(r"(^|[\n;])\s*(\.(shell|system|sh)\b|\.(once|output|import|excel)\s+['\"]?\|"
                        r"|\\!|\\[og]\s*\||\\copy\b.*\bprogram\b|system\s|\\\.|\.load\b)"
                        r"|\bload_extension\s*\(|\bcopy\b[^;]*\bprogram\b", re.IGNORECASE | re.DOTALL)


def _db(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """Database shells run a command through their shell escapes (``.shell``, ``\\!``)."""
    name = os.path.basename(words[0].text)
    texts = [w for w in words[1:] if not w.text.startswith("-") or w.text.startswith("-cmd")]
    texts += [v for _, v in option_values(words, ("-c", "--command", "-e", "--execute", "-cmd"))]
    for w in texts:
        if _DB_ESCAPE.search(w.text):
            ctx.opaque(f"{name} with a shell escape", w.text)
    if io.stdin is not None and io.stdin.kind != "file":
        text, desc = io.stdin.text()
        if text is None:
            ctx.opaque(f"{name} reading commands from {desc} (its shell escapes run programs)")
        elif _DB_ESCAPE.search(text):
            ctx.opaque(f"{name} with a shell escape in {desc}", text)


def _at(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """``at``/``batch`` run the shell commands on their stdin later; ``-f FILE`` reads a file."""
    sc = scan_options(words, opts("-f -q -t -M", "-m -v -u", "-l -r -d -c -V"), 1)
    if sc.stopped is not None or sc.has("-f"):
        return
    name = os.path.basename(words[0].text)
    if io.stdin is None:
        return
    text, desc = io.stdin.text()
    if text is not None:
        ctx.script(text, f"the job {name} runs later, from {desc}")
    elif io.stdin.kind != "file":
        ctx.opaque(f"{name} scheduling commands from {desc}")


def _crontab(words: list[Word], io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """``crontab -`` installs the schedule on its stdin; each line's command runs later."""
    operands = [w for w in words[1:] if not w.text.startswith("-") or w.text == "-"]
    if not operands or operands[0].text != "-" or io.stdin is None:
        return
    text, desc = io.stdin.text()
    if text is None:
        ctx.opaque(f"crontab installing a schedule from {desc}")
        return
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", line):
            continue
        fields = line.split(None, 1 if line.startswith("@") else 5)
        if len(fields) > (1 if line.startswith("@") else 5):
            ctx.script(fields[-1], "a job crontab installs")


def _tar(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """tar runs commands: ``--to-command``, ``--checkpoint-action=exec=``, ``-I PROG``."""
    for name, value in option_values(words, ("--to-command", "--checkpoint-action",
                                              "--use-compress-program", "-I", "--rsh-command")):
        if name == "--checkpoint-action":
            if value.text.startswith("exec="):
                ctx.script(Word(value.text[5:], value.raw, value.mask[5:]),
                           "the checkpoint action of tar")
        elif name == "--to-command":
            ctx.script(value, "the command of tar --to-command")
        else:
            ctx.script(value, f"the program of tar {name}")


def _zip(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    for name, value in option_values(words, ("-TT", "--unzip-command")):
        ctx.script(value, f"the test command of zip {name}")


def _rsync(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    for name, value in option_values(words, ("-e", "--rsh", "--rsync-path")):
        ctx.script(value, f"the command of rsync {name}")


def _socat(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """socat's ``EXEC:`` and ``SYSTEM:`` addresses run a program or a shell command."""
    for w in words[1:]:
        head, colon, rest = w.text.partition(":")
        if not colon:
            continue
        tail = Word(rest.split(",")[0], w.raw, w.mask[len(head) + 1:][:len(rest.split(",")[0])])
        if head.lower() == "system":
            ctx.script(tail, "the SYSTEM address of socat")
        elif head.lower() == "exec":
            ctx.script(tail, "the EXEC address of socat")


def _rpm(words: list[Word], _io: Io, ctx: Ctx, _assigns: list[Word]) -> None:
    """``rpm --eval`` expands macros, and ``%(...)`` and ``%{lua:...}`` run code."""
    for _, value in option_values(words, ("--eval", "-E")):
        if "%(" in value.text or "lua:" in value.text:
            ctx.opaque("rpm --eval (macros that run commands)", value.text)


def _prompt_expansions(text: str, ctx: Ctx, label: str) -> None:
    """Command substitutions in a value the shell expands later (PS4, PS1, PROMPT_COMMAND)."""
    Lexer(text, lambda inner: ctx.script(inner, label)).scan_expansions(text)


HANDLERS: dict[str, Handler] = {
    **{name: _shell for name in SHELLS},
    "eval": _eval, "source": _source, ".": _source, "trap": _trap,
    "mapfile": _mapfile, "readarray": _mapfile, "alias": _alias,
    **{name: _declare for name in ("export", "declare", "typeset", "local", "readonly")},
    **{name: _subscripts for name in ("let", "printf", "read", "unset", "test", "[", "[[",
                                      "wait", "shift", "return", "exit")},
    "deno": _deno, "find": _find, "sed": _sed, "gsed": _sed,
    **{name: _awk for name in ("awk", "gawk", "mawk", "nawk", "busybox-awk")},
    "rg": _rg, "ripgrep": _rg, "make": _make, "gmake": _make, "cmake": _cmake,
    **{name: _vim for name in _VIM}, "ed": _ed, "red": _ed,
    **{name: _pager for name in ("less", "more", "most", "man")},
    **{name: _db for name in ("sqlite3", "psql", "mysql", "mariadb")},
    "at": _at, "batch": _at, "crontab": _crontab, "tar": _tar, "gtar": _tar, "bsdtar": _tar,
    "zip": _zip, "rsync": _rsync, "socat": _socat, "rpm": _rpm,
    "jrunscript": _interpreter, "jjs": _interpreter,
}


def handler_for(name: str) -> Handler | None:
    """The handler for a program's base name (interpreters by family: python3.12 is Python)."""
    found = HANDLERS.get(name)
    if found is not None:
        return found
    if name == "git":
        return _git
    if interpreter(name) is not None:
        return _interpreter
    return None


def _git(words: list[Word], _io: Io, ctx: Ctx, assigns: list[Word]) -> None:
    git_routes(words, assigns, ctx)


prompt_expansions = _prompt_expansions
