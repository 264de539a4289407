"""Where a sed script runs commands: the ``e`` command and the ``s///e`` flag (GNU sed).

``e COMMAND`` runs COMMAND through ``sh -c``; a bare ``e`` and the ``e``
flag of ``s`` run the pattern space, text read from the input, which policy
cannot see.  Everything else a sed script does stays inside sed.
"""

from __future__ import annotations


class SedUnreadable(Exception):
    """The script is not one this reader understands."""


def sed_execs(script: str) -> list[str | None]:
    """Each command the script runs: its text, or ``None`` when it runs the pattern space."""
    return _Reader(script).run()


class _Reader:
    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.found: list[str | None] = []

    def run(self) -> list[str | None]:
        s = self.s
        while True:
            while self.i < len(s) and s[self.i] in " \t\n;":
                self.i += 1
            if self.i >= len(s):
                return self.found
            if s[self.i] == "#":
                self._to_eol()
                continue
            self._address()
            self._blanks()
            if self._peek(","):
                self.i += 1
                self._blanks()
                if self._peek("+") or self._peek("~"):
                    self.i += 1
                self._address()
                self._blanks()
            while self._peek("!"):
                self.i += 1
                self._blanks()
            if self.i >= len(s):
                raise SedUnreadable("an address without a command")
            self._command(s[self.i])

    def _peek(self, c: str) -> bool:
        return self.s.startswith(c, self.i)

    def _blanks(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def _to_eol(self) -> str:
        end = self.s.find("\n", self.i)
        end = len(self.s) if end < 0 else end
        text = self.s[self.i:end]
        self.i = end
        return text

    def _to_sep(self) -> str:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in ";\n}":
            self.i += 1
        return self.s[start:self.i]

    def _address(self) -> None:
        s = self.s
        if self.i >= len(s):
            return
        c = s[self.i]
        if c.isdigit():
            while self.i < len(s) and (s[self.i].isdigit() or s[self.i] == "~"):
                self.i += 1
        elif c == "$":
            self.i += 1
        elif c == "/" or c == "\\":
            if c == "\\":
                self.i += 1
                if self.i >= len(s):
                    raise SedUnreadable("an address delimiter is missing")
            self._delimited(s[self.i])
            while self.i < len(s) and s[self.i] in "IM":
                self.i += 1

    def _delimited(self, delim: str) -> None:
        """Skip ``<delim>...<delim>`` starting at the opening delimiter (escapes honoured)."""
        s = self.s
        self.i += 1
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.i += 2
                continue
            if c == "\n" and delim != "\n":
                raise SedUnreadable("a newline inside a regular expression")
            if c == "[" and delim != "[":
                self._bracket()
                continue
            if c == delim:
                self.i += 1
                return
            self.i += 1
        raise SedUnreadable(f"unterminated {delim!r}-delimited text")

    def _bracket(self) -> None:
        s = self.s
        j = self.i + 1
        if j < len(s) and s[j] == "^":
            j += 1
        if j < len(s) and s[j] == "]":
            j += 1
        while j < len(s) and s[j] != "]":
            if s.startswith(("[:", "[=", "[."), j):
                end = s.find(s[j + 1] + "]", j + 2)
                j = len(s) if end < 0 else end + 2
                continue
            if s[j] == "\n":
                break
            j += 1
        if j >= len(s) or s[j] != "]":
            self.i += 1  # not a bracket expression after all: a plain "["
            return
        self.i = j + 1

    def _command(self, c: str) -> None:
        self.i += 1
        if c in "{}=dDgGhHnNpPxzF":
            return
        if c in "lLqQ":
            self._blanks()
            while self.i < len(self.s) and self.s[self.i].isdigit():
                self.i += 1
            return
        if c in "aic":
            self._text()
            return
        if c in "bTt:v":
            self._blanks()
            self._to_sep()
            return
        if c in "rRwW":
            self._to_eol()
            return
        if c == "e":
            self._blanks()
            command = self._to_eol().strip()
            self.found.append(command or None)
            return
        if c == "s":
            self._substitute()
            return
        if c == "y":
            if self.i >= len(self.s):
                raise SedUnreadable("y without its strings")
            delim = self.s[self.i]
            self._delimited(delim)
            self.i -= 1
            self._delimited(delim)
            return
        raise SedUnreadable(f"unknown sed command {c!r}")

    def _text(self) -> None:
        """The text of ``a``, ``i`` or ``c``: to the end of the line, continued by a backslash."""
        s = self.s
        if self._peek("\\"):
            self.i += 1
            if self._peek("\n"):
                self.i += 1
        while self.i < len(s):
            if s[self.i] == "\\" and self.i + 1 < len(s):
                self.i += 2
                continue
            if s[self.i] == "\n":
                return
            self.i += 1

    def _substitute(self) -> None:
        s = self.s
        if self.i >= len(s) or s[self.i] in "\n\\":
            raise SedUnreadable("s without a delimiter")
        delim = s[self.i]
        self._delimited(delim)  # the regular expression; the replacement has no brackets
        while self.i < len(s) and s[self.i] != delim:
            self.i += 2 if s[self.i] == "\\" else 1
        if self.i >= len(s):
            raise SedUnreadable("unterminated s command")
        self.i += 1
        while self.i < len(s):
            c = s[self.i]
            if c in "gpiImM" or c.isdigit():
                self.i += 1
            elif c == "e":
                self.found.append(None)
                self.i += 1
            elif c == "w":
                self.i += 1
                self._to_eol()
                return
            elif c in " \t;\n}":
                return
            else:
                raise SedUnreadable(f"unknown flag {c!r} of s")
