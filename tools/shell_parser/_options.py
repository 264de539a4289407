"""Reading a program's options the way getopt does, to find where its operands (or command) start.

A wrong guess here is a hole: if policy thought ``-k`` took no value in
``timeout -k 5 10 rm -rf /`` it would judge ``10`` as the program.  So each
program that runs another one declares its options, and an option it does
not declare makes the command unreadable (asks) unless the program is marked
lenient because none of its options take a separate value.

Long options are read as getopt_long, git and Perl's Getopt::Long read them:
a prefix names the one option it begins (``rm --rec`` is ``rm --recursive``,
``timeout --sig KILL`` is ``--signal``), so a rule that looks for an option
looks for every spelling of it (:func:`abbreviates`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tools.shell_parser._model import Word


def abbreviates(arg: str, option: str) -> bool:
    """Whether the word ``arg`` names the long ``option``, ``=VALUE`` aside: the whole name or a
    prefix of it (``--rec`` for ``--recursive``), as getopt_long and git take it."""
    name = arg.partition("=")[0]
    return len(name) > 2 and name.startswith("--") and option.startswith(name)


def opts(values: str = "", flags: str | None = "", stops: str = "", optional: str = "",
         numeric: bool = False, cluster: bool = True, abbrev: bool = True) -> Opts:
    """An option table from space-separated spellings (``"-u --user"``); ``flags=None`` is lenient."""
    return Opts(frozenset(values.split()), None if flags is None else frozenset(flags.split()),
                frozenset(stops.split()), frozenset(optional.split()), numeric, cluster, abbrev)


@dataclass(frozen=True)
class Opts:
    values: frozenset[str]  # take a value: attached (-n5, --n=5) or the next word
    flags: frozenset[str] | None  # take no value; None accepts any option not listed elsewhere
    stops: frozenset[str]  # after these the program runs no command (command -v, sudo -l)
    optional: frozenset[str]  # take a value only when attached (xargs -i[R], --replace[=R])
    numeric: bool = False  # -10 is an option (nice -10)
    cluster: bool = True  # short options bundle (-abc); False: -name is one option (find)
    abbrev: bool = True  # a long option may be cut short (getopt_long); False: clap, exact only

    def long_name(self, name: str) -> str:
        """The declared long option ``name`` stands for: itself, or the one it abbreviates.

        A prefix of several declared options stays as written (the program refuses it as
        ambiguous; policy asks).  It never resolves to a stop (``--he`` is not taken for
        ``--help``): reading on past a stop only judges more.
        """
        declared = self.values | self.optional | (self.flags or frozenset())
        if not self.abbrev or name in declared or name in self.stops:
            return name
        found = [o for o in declared if o.startswith("--") and abbreviates(name, o)]
        return found[0] if len(found) == 1 else name


@dataclass
class Scan:
    """Where the operands start, and what the options said."""

    operand: int  # index of the first operand (len(words) when none)
    stopped: str | None = None  # the stop option met, if any
    unknown: str | None = None  # an undeclared option, if any
    values: list[tuple[str, Word]] = field(default_factory=list)

    def get(self, *names: str) -> list[Word]:
        return [w for o, w in self.values if o in names]

    def has(self, *names: str) -> bool:
        return any(o in names for o, _ in self.values)

    def stop(self, option: str) -> None:
        """The stop ``option`` was met: the program runs no command, so no word is an operand."""
        self.stopped = option

    def refuse(self, option: str, i: int) -> None:
        """``option``, at ``words[i]``, is one the scanner cannot read: where it ends is unknown."""
        self.unknown = option
        self.operand = i


ReadOption = Callable[[list[Word], int, Scan], int | None]
"""One program's reading of the option word ``words[i]``: how many words it takes, or None
when the scan ends there (a stop or an option it cannot read, recorded in the ``Scan``)."""


def scan_with(words: list[Word], start: int, read: ReadOption) -> Scan:
    """The one option loop, for every program's option grammar (getopt's, perl's, git's).

    Where the options end is decided here and nowhere else: at ``--``, at an operand, and at
    a word computed at run time (``-$FLAGS`` may be any option, ``-e CODE`` or ``-c CMD``
    included, so which word follows it is unknown: ``unknown`` names it).  A program's own
    grammar only reads the option words before that.
    """
    out = Scan(len(words))
    i = start
    while i < len(words):
        w = words[i]
        if w.text == "--":
            out.operand = i + 1
            return out
        if not w.text.startswith("-") or w.text == "-":
            out.operand = i
            return out
        if w.dynamic:
            out.refuse(w.raw, i)
            return out
        taken = read(words, i, out)
        if taken is None:
            return out
        i += taken
    return out


def scan_options(words: list[Word], spec: Opts, start: int = 0) -> Scan:
    """Read options from ``words[start:]`` up to the first operand (getopt with a leading ``+``)."""
    return scan_with(words, start, lambda ws, i, out: _getopt_word(ws, i, out, spec))


def _getopt_word(words: list[Word], i: int, out: Scan, spec: Opts) -> int | None:
    """One option word as getopt_long reads it under ``spec``: a long option, a ``-name``
    option (``cluster=False``), a number (``numeric``), or a cluster of short options."""
    w = words[i]
    t = w.text
    if t.startswith("--"):
        name, eq, val = t.partition("=")
        name = spec.long_name(name)
        if name in spec.stops:
            out.stop(name)
            return None
        if name in spec.values:
            if eq:
                out.values.append((name, _piece(w, val)))
                return 1
            if i + 1 < len(words):
                out.values.append((name, words[i + 1]))
                return 2
            return 1
        if name in spec.optional or spec.flags is None or name in spec.flags:
            if eq:
                out.values.append((name, _piece(w, val)))
            return 1
        out.refuse(name, i)
        return None
    if spec.numeric and t[1:].lstrip("+-").isdigit():
        return 1
    if not spec.cluster:
        name = t.partition("=")[0]
        if name in spec.stops:
            out.stop(name)
            return None
        if name in spec.values and i + 1 < len(words):
            out.values.append((name, words[i + 1]))
            return 2
        if spec.flags is None or name in spec.flags or name in spec.optional:
            return 1
        out.refuse(name, i)
        return None
    for j in range(1, len(t)):
        o = "-" + t[j]
        if o in spec.stops:
            out.stop(o)
            return None
        if o in spec.values:
            rest = t[j + 1:]
            if rest:
                out.values.append((o, _piece(w, rest)))
            elif i + 1 < len(words):
                out.values.append((o, words[i + 1]))
                return 2
            return 1
        if o in spec.optional:
            if t[j + 1:]:
                out.values.append((o, _piece(w, t[j + 1:])))
            return 1
        if spec.flags is None or o in spec.flags:
            continue
        out.refuse(o, i)
        return None
    return 1


def option_values(words: list[Word], names: tuple[str, ...]) -> list[tuple[str, Word]]:
    """Every value given to the options ``names``, anywhere among ``words[1:]`` up to ``--``.

    ``--opt=VALUE``, ``--opt VALUE`` and a short ``-oVALUE``, with a long option in any
    spelling that abbreviates it (``tar --to-com=CMD``): for finding the code a program is
    handed, reading a prefix of several as each of them only asks more.
    """
    found: list[tuple[str, Word]] = []
    for k, w in enumerate(words[1:], start=1):
        t = w.text
        if t == "--":
            break
        for name in names:
            if name.startswith("--") and abbreviates(t, name):
                if "=" in t:
                    found.append((name, _piece(w, t.partition("=")[2])))
                elif k + 1 < len(words):
                    found.append((name, words[k + 1]))
            elif t == name and k + 1 < len(words):
                found.append((name, words[k + 1]))
            elif len(name) == 2 and t.startswith(name) and len(t) > 2 and not t.startswith("--"):
                found.append((name, _piece(w, t[2:])))
    return found


def _piece(w: Word, value: str) -> Word:
    """The attached value of an option word (``--pre=cmd`` -> ``cmd``), keeping its mask."""
    off = len(w.text) - len(value)
    return Word(value, value, w.mask[off:], w.quoted, w.procsub)
