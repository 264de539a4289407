"""RE2 syntax: refuse PCRE-only constructs, and rewrite RE2 for ripgrep's dialect.

The model writes PCRE out of habit (lookarounds, backreferences, ``\\Z``).  RE2
rejects those with terse parser errors; we recognise them first and say which
construct was found and how to get the result with RE2 instead.

ripgrep's regex crate reads almost the same syntax but not always with the
same meaning: its ``\\d \\w \\s \\b`` are Unicode-aware (RE2's are ASCII), it
has no ``\\Q..\\E``, octal escapes or ``\\p{^X}``, it reads ``{,3}`` as an
error where RE2 reads a literal, and ``&& -- ~~ [`` inside a class are set
operators.  :func:`to_rust` parses the RE2 pattern into tokens and prints an
equivalent Rust pattern, so both engines run the same regular language.

The same token stream gives :func:`required_literals`: the literal strings of
which at least one must occur for a match (a cheap ``bytes in`` prefilter).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tools._result import ToolFailure

__all__ = ["Refusal", "required_literals", "to_rust", "line_mode_anchors"]

MAX_PATTERN_CHARS = 4096


@dataclass(frozen=True)
class Refusal:
    construct: str
    suggestion: str


_PERL_CLASSES = {
    "d": "0-9",
    "w": "0-9A-Za-z_",
    "s": "\\t\\n\\x0C\\r ",
}

# (?... group openers RE2 lacks, longest first.
_GROUP_REFUSALS: tuple[tuple[str, Refusal], ...] = (
    ("(?<=", Refusal("lookbehind (?<=...)",
                     "RE2 has no lookbehind: include the preceding text in the pattern "
                     "(e.g. 'foo(?<=x)bar' -> 'xbar'), or match it and ignore that part")),
    ("(?<!", Refusal("negative lookbehind (?<!...)",
                     "RE2 has no lookbehind: search for the text, then exclude the unwanted "
                     "prefix with a second grep or by reading the matches")),
    ("(?=", Refusal("lookahead (?=...)",
                    "RE2 has no lookahead: include the following text in the pattern "
                    "('foo(?=bar)' -> 'foobar'), or capture it as a group")),
    ("(?!", Refusal("negative lookahead (?!...)",
                    "RE2 has no lookahead: search broadly and filter in a second grep, or use "
                    "a negated class for one character ('foo[^b]' instead of 'foo(?!b)')")),
    ("(?>", Refusal("atomic group (?>...)",
                    "use a plain group (?:...): RE2 never backtracks, so atomic groups are "
                    "unnecessary")),
    ("(?|", Refusal("branch reset group (?|...)", "use an ordinary group (?:a|b)")),
    ("(?(", Refusal("conditional (?(cond)yes|no)",
                    "split it into alternatives 'a|b', or run two searches")),
    ("(?#", Refusal("comment (?#...)", "remove the comment from the pattern")),
    ("(?P=", Refusal("named backreference (?P=name)",
                     "RE2 cannot match repeated text: search for the first part, then check "
                     "the repeat in a second step, or spell the repeat out literally")),
    ("(?P>", Refusal("recursion (?P>name)",
                     "regular expressions in RE2 cannot recurse: search for the opening "
                     "token and read the file around the matches")),
    ("(?&", Refusal("recursion (?&name)",
                    "regular expressions in RE2 cannot recurse: search for the opening token "
                    "and read the file around the matches")),
    ("(?R)", Refusal("recursion (?R)",
                     "regular expressions in RE2 cannot recurse: search for the opening token "
                     "and read the file around the matches")),
)

_ESCAPE_REFUSALS: dict[str, Refusal] = {
    "Z": Refusal("\\Z (end of text before a final newline)",
                 "use '$' for the end of a line, or '\\z' for the end of the file with "
                 "multiline: true"),
    "G": Refusal("\\G (end of the previous match)", "anchor with '^' instead"),
    "K": Refusal("\\K (keep out of the match)",
                 "put the part you want in a capture group; the match then includes the prefix"),
    "R": Refusal("\\R (any line break)", "use '\\r?\\n' (needs multiline: true) or '$'"),
    "h": Refusal("\\h (horizontal space)", "use '[ \\t]'"),
    "H": Refusal("\\H (non-horizontal-space)", "use '[^ \\t]'"),
    "V": Refusal("\\V (non-vertical-space)", "use '[^\\n\\r]' or '.'"),
    "X": Refusal("\\X (extended grapheme cluster)", "use '\\P{M}\\p{M}*' or '.'"),
    "k": Refusal("named backreference \\k<name>",
                 "RE2 cannot match repeated text: search for the first part, then check the "
                 "repeat in a second step, or spell the repeat out literally"),
    "g": Refusal("backreference \\g{n}",
                 "RE2 cannot match repeated text: search for the first part, then check the "
                 "repeat in a second step, or spell the repeat out literally"),
    "C": Refusal("\\C (any single byte)", "use '.' (any character)"),
    "N": Refusal("\\N (PCRE non-newline / named character)", "use '.' or the character itself"),
    "e": Refusal("\\e (escape character)", "use '\\x1B'"),
    "c": Refusal("\\c (control character)", "use '\\xHH' with the character's code"),
    "o": Refusal("\\o{...} (octal)", "use '\\x{HH}'"),
    "u": Refusal("\\u (Unicode escape)", "use '\\x{HHHH}'"),
    "U": Refusal("\\U (Unicode escape)", "use '\\x{HHHHHH}'"),
    "l": Refusal("\\l (lowercase next character)", "write the character as it is"),
    "L": Refusal("\\L (lowercase span)", "write the characters as they are"),
    "E": Refusal("\\E without \\Q", "remove the stray \\E"),
}

_BACKREF_REFUSAL = Refusal(
    "backreference \\1",
    "RE2 cannot match repeated text: capture the first part with a group, search for that, "
    "and check the repeat in a second step (or spell the repeat out literally)",
)
_POSSESSIVE_REFUSAL = Refusal(
    "possessive quantifier (*+, ++, ?+ or {n}+)",
    "drop the trailing '+': RE2 never backtracks, so the plain quantifier is already safe",
)
_VERBOSE_REFUSAL = Refusal(
    "verbose flag (?x)", "remove the x flag, the whitespace and the comments from the pattern"
)


def refuse(found: Refusal) -> ToolFailure:
    return ToolFailure(
        "unsupported_regex",
        f"The pattern uses {found.construct}, which RE2 (the regex engine grep uses, for "
        f"safety: no catastrophic backtracking) does not support. Instead, {found.suggestion}.",
        details={"construct": found.construct},
    )


# --- tokenizer ---------------------------------------------------------------
# A token is (kind, text, value):
#   lit    a literal character (value: the character)
#   perl   \d \D \w \W \s \S (value: the letter)
#   class  a bracket class (value: list of class items, see _parse_class)
#   meta   any other syntax, copied through (., ^, $, |, (, ), quantifiers, \b, \p{..} ...)

_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_FLAGS_GROUP = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?(:|\))")
_NAMED_GROUP = re.compile(r"\(\?P?<[A-Za-z_][A-Za-z0-9_]*>")
_HEX = re.compile(r"x(\{[0-9A-Fa-f]+\}|[0-9A-Fa-f]{2})")
_UPROP = re.compile(r"[pP](\{\^?[A-Za-z_ ]+\}|[A-Za-z])")
_OCTAL = re.compile(r"[0-7]{1,3}")
_POSIX = re.compile(r"\[:\^?[a-z]+:\]")

Token = tuple[str, str, object]


def tokenize(pattern: str) -> list[Token]:
    """Split an RE2 pattern into tokens, refusing constructs RE2 lacks.

    Patterns RE2 would reject for other reasons may still tokenize; the RE2
    compile that follows reports those.
    """
    out: list[Token] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            tok, i = _escape(pattern, i, in_class=False)
            out.extend(tok)
            continue
        if c == "[":
            items, j = _parse_class(pattern, i)
            out.append(("class", pattern[i:j], items))
            i = j
            continue
        if c == "(":
            for opener, refusal in _GROUP_REFUSALS:
                if pattern.startswith(opener, i):
                    raise refuse(refusal)
            m = _FLAGS_GROUP.match(pattern, i)
            if pattern.startswith("(?", i) and m is None and not _NAMED_GROUP.match(pattern, i):
                if re.match(r"\(\?[a-zA-Z-]*x", pattern[i:]):
                    raise refuse(_VERBOSE_REFUSAL)
                if re.match(r"\(\?[+-]?\d", pattern[i:]):
                    raise refuse(Refusal("recursion (?N)", "search for the opening token and "
                                         "read the file around the matches"))
            if m is not None:
                out.append(("meta", m.group(0), None))
                i = m.end()
                continue
            nm = _NAMED_GROUP.match(pattern, i)
            if nm is not None:
                out.append(("meta", nm.group(0), None))
                i = nm.end()
                continue
            out.append(("meta", c, None))
            i += 1
            continue
        if c in "*+?":
            nxt = pattern[i + 1] if i + 1 < n else ""
            if nxt == "+" and out and out[-1][0] != "quant":
                raise refuse(_POSSESSIVE_REFUSAL)
            text = c + ("?" if nxt == "?" else "")
            out.append(("quant", text, None))
            i += len(text)
            continue
        if c == "{":
            m = _REPEAT.match(pattern, i)
            if m is not None:
                j = m.end()
                if j < n and pattern[j] == "+":
                    raise refuse(_POSSESSIVE_REFUSAL)
                if j < n and pattern[j] == "?":
                    j += 1
                out.append(("quant", pattern[i:j], (int(m.group(1)), m.group(2), m.group(3))))
                i = j
                continue
            out.append(("lit", c, c))  # RE2 reads a brace that starts no repetition literally
            i += 1
            continue
        if c in ".^$|)":
            out.append(("meta", c, None))
            i += 1
            continue
        out.append(("lit", c, c))
        i += 1
    return out


def _escape(p: str, i: int, *, in_class: bool) -> tuple[list[Token], int]:
    """Tokens for the escape at ``p[i] == '\\'`` and the index after it."""
    if i + 1 >= len(p):
        return [("meta", "\\", None)], i + 1  # trailing backslash: RE2 reports it
    c = p[i + 1]
    if c == "Q":
        end = p.find("\\E", i + 2)
        body = p[i + 2 :] if end < 0 else p[i + 2 : end]
        j = len(p) if end < 0 else end + 2
        return [("lit", ch, ch) for ch in body], j
    if c in "123456789":
        m = _OCTAL.match(p, i + 1)
        assert m is not None
        if len(m.group(0)) == 1 or c in "89":
            raise refuse(_BACKREF_REFUSAL)
        ch = chr(int(m.group(0), 8))
        return [("lit", p[i : m.end()], ch)], m.end()
    if c == "0":
        m = _OCTAL.match(p, i + 1)
        assert m is not None
        return [("lit", p[i : m.end()], chr(int(m.group(0), 8)))], m.end()
    if c in _ESCAPE_REFUSALS:
        raise refuse(_ESCAPE_REFUSALS[c])
    if c in "dDwWsS":
        return [("perl", p[i : i + 2], c)], i + 2
    if c == "x":
        m = _HEX.match(p, i + 1)
        if m is None:
            return [("meta", p[i : i + 2], None)], i + 2
        digits = m.group(1).strip("{}")
        return [("lit", p[i : m.end()], chr(int(digits, 16)) if int(digits, 16) <= 0x10FFFF
                 else "\ufffd")], m.end()
    if c in "pP":
        m = _UPROP.match(p, i + 1)
        if m is None:
            return [("meta", p[i : i + 2], None)], i + 2
        return [("uprop", p[i : m.end()], (c, m.group(1)))], m.end()
    simple = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
    if c in simple:
        return [("lit", p[i : i + 2], simple[c])], i + 2
    if c in "AzbB":
        return [("meta", p[i : i + 2], None)], i + 2
    if c.isalnum():
        return [("meta", p[i : i + 2], None)], i + 2  # RE2 rejects it: let the compile say so
    return [("lit", p[i : i + 2], c)], i + 2


def _parse_class(p: str, i: int) -> tuple[list[object], int]:
    """Items of the bracket class starting at ``p[i] == '['``.

    Items: ``("neg",)`` first when negated, then ``("char", ch)``,
    ``("range", a, b)``, ``("perl", letter)``, ``("posix", text)``,
    ``("uprop", letter, name)``.  Malformed classes come back with what was
    read; RE2's compile reports them.
    """
    items: list[object] = []
    j = i + 1
    n = len(p)
    if j < n and p[j] == "^":
        items.append(("neg",))
        j += 1
    first = True
    while j < n:
        c = p[j]
        if c == "]" and not first:
            return items, j + 1
        first = False
        if c == "[":
            m = _POSIX.match(p, j)
            if m is not None:
                items.append(("posix", m.group(0)))
                j = m.end()
                continue
        if c == "\\":
            toks, k = _escape(p, j, in_class=True)
            kind, _text, value = toks[0] if toks else ("meta", "", None)
            if kind == "perl":
                items.append(("perl", value))
                j = k
                continue
            if kind == "uprop":
                assert isinstance(value, tuple)
                items.append(("uprop", value[0], value[1]))
                j = k
                continue
            if kind != "lit" or len(toks) != 1:
                items.append(("raw", p[j:k]))
                j = k
                continue
            assert isinstance(value, str)
            lo, j = value, k
        else:
            lo, j = c, j + 1
        if j + 1 < n and p[j] == "-" and p[j + 1] != "]":
            if p[j + 1] == "\\":
                toks, k = _escape(p, j + 1, in_class=True)
                if toks and toks[0][0] == "lit" and len(toks) == 1:
                    hi = toks[0][2]
                    assert isinstance(hi, str)
                    items.append(("range", lo, hi))
                    j = k
                    continue
                items.append(("char", lo))
                continue
            items.append(("range", lo, p[j + 1]))
            j += 2
            continue
        items.append(("char", lo))
    return items, n


# --- rewriting ------------------------------------------------------------------

def _rust_char(ch: str) -> str:
    if ch.isascii() and ch.isalnum():
        return ch
    return f"\\x{{{ord(ch):X}}}"


def _rust_class(items: list[object]) -> str:
    parts: list[str] = []
    neg = False
    for item in items:
        assert isinstance(item, tuple)
        kind = item[0]
        if kind == "neg":
            neg = True
        elif kind == "char":
            parts.append(_rust_char(item[1]))
        elif kind == "range":
            parts.append(_rust_char(item[1]) + "-" + _rust_char(item[2]))
        elif kind == "perl":
            letter = item[1]
            body = _PERL_CLASSES[letter.lower()]
            parts.append(body if letter.islower() else "[^" + body + "]")
        elif kind == "posix":
            parts.append(item[1])
        elif kind == "uprop":
            parts.append(_rust_uprop(item[1], item[2]))
        else:
            parts.append(item[1])
    return "[" + ("^" if neg else "") + "".join(parts) + "]"


def _rust_uprop(letter: str, name: str) -> str:
    if name.startswith("{^"):
        letter = "P" if letter == "p" else "p"
        name = "{" + name[2:]
    return "\\" + letter + name


def to_rust(tokens: list[Token]) -> str:
    """Print tokens as a pattern for ripgrep's regex crate with RE2's meaning."""
    out: list[str] = []
    for kind, text, value in tokens:
        if kind == "lit":
            assert isinstance(value, str)
            out.append(_rust_char(value))
        elif kind == "perl":
            assert isinstance(value, str)
            body = _PERL_CLASSES[value.lower()]
            out.append("[" + body + "]" if value.islower() else "[^" + body + "]")
        elif kind == "class":
            assert isinstance(value, list)
            out.append(_rust_class(value))
        elif kind == "uprop":
            assert isinstance(value, tuple)
            out.append(_rust_uprop(value[0], value[1]))
        elif text in ("\\b", "\\B"):
            out.append("(?-u:" + text + ")")  # RE2's word boundary is ASCII
        else:
            out.append(text)
    return "".join(out)


def line_mode_anchors(tokens: list[Token]) -> list[Token]:
    """In line mode each line is the haystack: ``\\A``/``\\z`` mean its start/end."""
    swapped: list[Token] = []
    for tok in tokens:
        if tok[0] == "meta" and tok[1] == "\\A":
            swapped.append(("meta", "^", None))
        elif tok[0] == "meta" and tok[1] == "\\z":
            swapped.append(("meta", "$", None))
        else:
            swapped.append(tok)
    return swapped


def to_re2(tokens: list[Token]) -> str:
    return "".join(t[1] for t in tokens)


def matches_newline_literally(tokens: list[Token]) -> bool:
    return any(kind == "lit" and value == "\n" for kind, _t, value in tokens)


def required_literals(tokens: list[Token]) -> list[str] | None:
    """Literals of which at least one must occur in any match, or None if unknown.

    Only two simple shapes are recognised, which cover most searches: a
    top-level sequence containing a run of plain characters (the longest run
    is returned), and a top-level alternation of plain strings, optionally
    inside one group (``(TODO|FIXME|XXX)``).  Any flag group turns the
    analysis off (case folding would change which bytes are required).
    """
    if any(kind == "meta" and text.startswith("(?") and not text.startswith(("(?:", "(?P<", "(?<"))
           for kind, text, _v in tokens):
        return None
    alts = _top_level_alternatives(tokens)
    if alts is not None:
        return alts
    best = ""
    run = ""
    depth = 0
    for idx, (kind, text, value) in enumerate(tokens):
        nxt = tokens[idx + 1] if idx + 1 < len(tokens) else None
        optional_next = nxt is not None and nxt[0] == "quant" and _may_be_zero_or_repeat(nxt)
        if kind == "meta" and text == "|" and depth == 0:
            return None
        if kind == "meta" and text.startswith("("):
            depth += 1
        if kind == "meta" and text == ")":
            depth -= 1
        if depth == 0 and kind == "lit" and not optional_next:
            assert isinstance(value, str)
            run += value
            continue
        if depth == 0 and kind == "lit" and optional_next:
            pass
        if len(run) > len(best):
            best = run
        run = ""
    if len(run) > len(best):
        best = run
    return [best] if len(best) >= 3 else None


def _may_be_zero_or_repeat(tok: Token) -> bool:
    # Any quantifier ends the run: '*' and '?' make the character optional,
    # '+' and '{n,m}' repeat it, so the run cannot continue past it.
    return True


def _top_level_alternatives(tokens: list[Token]) -> list[str] | None:
    body = tokens
    if (len(tokens) >= 2 and tokens[0][0] == "meta" and tokens[0][1] in ("(", "(?:")
            and tokens[-1] == ("meta", ")", None)):
        inner = tokens[1:-1]
        if not any(t[0] == "meta" and t[1] in ("(", "(?:", ")") for t in inner):
            body = inner
    alts: list[str] = []
    current = ""
    saw_bar = False
    for kind, text, value in body:
        if kind == "meta" and text == "|":
            saw_bar = True
            alts.append(current)
            current = ""
        elif kind == "lit":
            assert isinstance(value, str)
            current += value
        else:
            return None
    alts.append(current)
    if not saw_bar or any(len(a) == 0 for a in alts):
        return None
    return alts
