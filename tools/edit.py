"""edit: replace an exact string in a file the session has read.

Matching is exact on the file's decoded text, and done in its bytes:
``old_string`` is encoded the way the file is (UTF-8, Latin-1, UTF-8 with
stray invalid bytes kept as-is, and its line ending: in a file that is
uniformly CRLF or CR, a ``\n`` means that ending) and searched for in the raw
bytes through ``mmap``, so a 100 MB file is
never held in memory and nothing outside the matched regions can change: the
output is streamed as *prefix + replacement + ... + suffix* straight from the
original bytes.  UTF-16/32 files (rare) are decoded whole instead.

When nothing matches, the nearest candidate is found with rapidfuzz over
windows of as many lines as ``old_string`` has, and the error says *why* it
differs when the reason is mechanical (CRLF vs LF, tabs vs spaces, trailing
whitespace, indentation, a byte-order mark).
"""

from __future__ import annotations

import dataclasses
import hashlib
import mmap
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import Field

from tools._diffs import bound_diff, new_file_diff, text_diff
from tools._mutate import (
    check_overwrite,
    check_target_dir,
    keep_preimage,
    locate_for_check,
    locate_for_write,
)
from tools._near import missing_file_failure
from tools._paths import Located
from tools._result import ToolFailure, ToolResult, success
from tools._text_files import CHUNK, FileFacts, atomic_write, decode, display, encode, encode_new
from tools._tool import Args, Tool, ToolContext
from tools.read import TRUNCATED_LINE

__all__ = ["Edit", "EditArgs"]

_CONTEXT_LINES = 3
_MAX_LISTED = 50
_MAX_SNIPPETS = 3
_WINDOW_MAX_LINES = 60
# The success snippet is for the model to check its change, not a copy of it:
# at most this many lines per replacement shown (head and tail of a longer one),
# each cut like read cuts a long line.
_SNIPPET_MAX_LINES = 40
_SNIPPET_HEAD_LINES = 30
_SNIPPET_LINE_CHARS = 500


class EditArgs(Args):
    path: str = Field(description="Absolute path of the file to change.")
    old_string: str = Field(
        description="Exact text to replace, including indentation and line endings. Must occur "
        "exactly once unless replace_all is true. Empty only to create a new file."
    )
    new_string: str = Field(description="Replacement text. Must differ from old_string.")
    replace_all: bool = Field(default=False, description="Replace every occurrence. Default false.")


class Edit(Tool):
    name = "edit"
    description = (
        "Replace an exact piece of text in a file. old_string must match the file byte for "
        "byte, including indentation, tabs and line endings (nothing is trimmed or fuzzy-"
        "matched); copy it from read's output without the line-number prefix. Include enough "
        "surrounding lines that it occurs once, or set replace_all to change every occurrence. "
        "Requires that you read the file in this session and that it has not changed since. "
        "On success returns the changed region with line numbers, so there is no need to read "
        "again. If the text is not found, the error shows the closest candidate and why it "
        "differs; if it occurs several times, the error lists the line numbers. An empty "
        "old_string creates a new file. Use write to replace a whole file."
    )
    args_model = EditArgs
    capabilities = frozenset({"fs:write"})
    mutates = True

    def check(self, args: EditArgs, ctx: ToolContext) -> None:
        _refuse_no_change(args)
        loc = locate_for_check(ctx, args.path, create_parents=not args.old_string)
        if loc is None:
            encode_new(args.new_string, what="new_string")
            return
        with loc:
            if _check_new(args, ctx, loc):
                return
            fd, facts = check_overwrite(ctx, loc, tool="edit")
            try:
                body = _Body.open(fd, facts)
                try:
                    _plan(args, ctx, loc.path, body, facts)
                finally:
                    body.close()
            finally:
                os.close(fd)

    def preview(self, args: EditArgs, ctx: ToolContext) -> str | None:
        """The unified diff this edit would make, numbered as the file on disk is."""
        loc = locate_for_check(ctx, args.path, create_parents=not args.old_string)
        if loc is None:
            return new_file_diff(args.path, args.new_string)
        with loc:
            if _check_new(args, ctx, loc):
                return new_file_diff(loc.path, args.new_string)
            fd, facts = check_overwrite(ctx, loc, tool="edit")
            try:
                body = _Body.open(fd, facts)
                try:
                    plan, _ = _plan(args, ctx, loc.path, body, facts)
                finally:
                    body.close()
            finally:
                os.close(fd)
        return plan.diff

    def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        _refuse_no_change(args)
        with locate_for_write(ctx, args.path, create_parents=not args.old_string) as loc:
            if _check_new(args, ctx, loc):
                data = encode_new(args.new_string, what="new_string")
                written = atomic_write(loc.dir_fd, loc.name, loc.path, [data],
                                       mode=ctx.settings.new_file_mode)
                digest = hashlib.sha256(data).hexdigest()
                return success(
                    f"Created {loc.path} ({written} bytes).",
                    path=loc.path, created=True, changed=True, replacements=0,
                    bytes_written=written, sha256_after=digest,
                    file_state={"path": loc.path, "sha256": digest},
                )
            fd, facts = check_overwrite(ctx, loc, tool="edit")
            try:
                body = _Body.open(fd, facts)
                try:
                    plan, chunks = _plan(args, ctx, loc.path, body, facts)
                    kept = keep_preimage(ctx, fd, loc.path, facts.size)
                    assert loc.st is not None
                    hasher = hashlib.sha256()
                    written = atomic_write(
                        loc.dir_fd, loc.name, loc.path, _hashing(chunks, hasher),
                        mode=stat.S_IMODE(loc.st.st_mode), owner=(loc.st.st_uid, loc.st.st_gid),
                    )
                finally:
                    body.close()
            finally:
                os.close(fd)
        digest = hasher.hexdigest()
        n = len(plan.offsets)
        what = f"{n} occurrence{'s' if n > 1 else ''}"
        notes = (f" New line endings were written as {facts.newline_label} to match the file."
                 if plan.crlf else "")
        where = f"line{'s' if n > 1 else ''} {_ranges(plan.lines)}"
        head = f"Edited {loc.path}: replaced {what} ({where}).{notes}"
        snippet = "\n".join(plan.snippets)
        more = ""
        if n > len(plan.snippets):
            more = f"\n[{n - len(plan.snippets)} more replacement(s) not shown]"
        return success(
            f"{head}\n{snippet}{more}", truncated=plan.cut or bool(more),
            path=loc.path, changed=True, created=False, replacements=n, lines=plan.lines,
            bytes_before=facts.size, bytes_written=written, sha256_before=facts.sha256,
            sha256_after=digest, file_state={"path": loc.path, "sha256": digest},
            diff=plan.diff, crlf_converted=plan.crlf, artifacts=kept,
        )


def _refuse_no_change(args: EditArgs) -> None:
    if args.old_string == args.new_string:
        raise ToolFailure(
            "no_change",
            "old_string and new_string are identical, so the edit would change nothing. "
            "Put the text you want in new_string.",
        )


def _check_new(args: EditArgs, ctx: ToolContext, loc: Located) -> bool:
    """Whether this edit creates a new file; raises when the target cannot be edited at all."""
    check_target_dir(loc)
    if not loc.exists:
        if args.old_string:
            raise missing_file_failure(ctx, args.path, loc)
        return True
    if not args.old_string:
        raise ToolFailure(
            "file_exists",
            f"{loc.path} already exists; an empty old_string only creates new files. To "
            "insert text, put a neighbouring line in old_string and the same line plus "
            "your text in new_string; to replace everything, use write.",
        )
    return False


def _plan(
    args: EditArgs, ctx: ToolContext, path: str, body: _Body, facts: FileFacts
) -> tuple[_Plan, Iterator[bytes]]:
    """Where the edit applies and the new file's bytes, or the failure saying why it cannot."""
    result = _apply(args, ctx, path, body, facts)
    if result is None:
        raise _no_match(args, ctx, path, body, facts)
    return result


def _hashing(chunks: Iterator[bytes], hasher: hashlib._Hash) -> Iterator[bytes]:
    for chunk in chunks:
        hasher.update(chunk)
        yield chunk


class _Body:
    """The file's bytes after the BOM, searchable without loading them whole."""

    def __init__(self, data: bytes | mmap.mmap, start: int, wide: bool, nl: bytes = b"\n") -> None:
        self.data = data
        self.start = start  # offset of the body (after the BOM) inside data
        self.wide = wide
        self.nl = nl  # the byte that ends a line: CR in a CR-only file, else LF

    @classmethod
    def open(cls, fd: int, facts: FileFacts) -> _Body:
        nl = b"\r" if facts.newline == "\r" else b"\n"
        wide = facts.encoding.startswith(("utf-16", "utf-32"))
        if wide:
            # Decode whole and work in UTF-8; converted back on output.
            raw = os.pread(fd, facts.size, 0)[len(facts.bom):]
            return cls(decode(raw, facts).encode("utf-8", "surrogatepass"), 0, True, nl)
        if facts.size == 0:
            return cls(b"", 0, False, nl)
        return cls(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), len(facts.bom), False, nl)

    @property
    def end(self) -> int:
        return len(self.data)

    def find_all(self, needle: bytes) -> list[int]:
        found: list[int] = []
        pos = self.data.find(needle, self.start)
        while pos != -1:
            found.append(pos)
            pos = self.data.find(needle, pos + len(needle))
        return found

    def count_newlines(self, start: int, end: int) -> int:
        total = 0
        for lo in range(start, end, CHUNK):
            total += self.data[lo : min(end, lo + CHUNK)].count(self.nl)
        return total

    def line_start(self, pos: int, back: int) -> int:
        """Offset of the start of the line ``back`` lines above the one holding ``pos``."""
        for _ in range(back + 1):
            nl = self.data.rfind(self.nl, self.start, pos)
            if nl == -1:
                return self.start
            pos = nl
        return pos + 1

    def line_end(self, pos: int, forward: int) -> int:
        """Offset of the newline ending the line ``forward`` lines below ``pos`` (or EOF)."""
        nl = pos
        for _ in range(forward + 1):
            nl = self.data.find(self.nl, pos)
            if nl == -1:
                end = self.end
                return end - 1 if end > self.start and self.data[end - 1 : end] == self.nl else end
            pos = nl + 1
        return nl

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()


@dataclass
class _Plan:
    offsets: list[int]
    lines: list[int]
    snippets: list[str]
    diff: str
    crlf: bool
    cut: bool = False  # a snippet was shortened


def _apply(
    args: EditArgs, ctx: ToolContext, path: str, body: _Body, facts: FileFacts
) -> tuple[_Plan, Iterator[bytes]] | None:
    search_enc = _search_facts(body, facts)
    try:
        # One codec: in a file whose line endings are uniformly CRLF (or CR), a \n
        # the model wrote is that line ending, in old_string as in new_string.
        needle = encode(facts.to_file_text(args.old_string), search_enc, what="old_string")
    except ToolFailure:
        return None  # the file cannot contain it; reported as no match with the reason
    new_text = facts.to_file_text(args.new_string)
    crlf = new_text != args.new_string
    replacement = encode(new_text, search_enc, what="new_string")
    offsets = body.find_all(needle)
    if not offsets:
        return None
    if len(offsets) == 1 and not args.replace_all:
        # find_all skips occurrences overlapping the one found ("aa" in "aaa"):
        # they all start inside the first match, and make the edit just as ambiguous.
        pos = body.data.find(needle, offsets[0] + 1)
        while pos != -1:
            offsets.append(pos)
            pos = body.data.find(needle, pos + 1)
    lines: list[int] = []
    line = 1
    last = body.start
    for off in offsets:
        line += body.count_newlines(last, off)
        lines.append(line)
        last = off
    if len(offsets) > 1 and not args.replace_all:
        listed = ", ".join(str(n) for n in lines[:_MAX_LISTED])
        if len(lines) > _MAX_LISTED:
            listed += f" and {len(lines) - _MAX_LISTED} more"
        raise ToolFailure(
            "ambiguous_match",
            f"old_string occurs {len(offsets)} times in {path} (starting on lines {listed}), so "
            "the edit is ambiguous and nothing was changed. Add surrounding lines to old_string "
            "so it matches exactly one place, or set replace_all to true to change all of them.",
            details={"count": len(offsets), "lines": lines},
        )
    snippets, diff, cut = _snippets(body, offsets, lines, needle, replacement, facts, path)

    def chunks() -> Iterator[bytes]:
        yield facts.bom
        pos = body.start
        for off in offsets:
            yield from _copy(body, pos, off, facts)
            yield _out(replacement, body, facts)
            pos = off + len(needle)
        yield from _copy(body, pos, body.end, facts)

    return _Plan(offsets, lines, snippets, diff, crlf, cut), chunks()


def _search_facts(body: _Body, facts: FileFacts) -> FileFacts:
    """How to encode text for searching ``body``: wide files are searched as UTF-8."""
    return dataclasses.replace(facts, encoding="utf-8", lossy=False) if body.wide else facts


def _out(piece: bytes, body: _Body, facts: FileFacts) -> bytes:
    if not body.wide:
        return piece
    return piece.decode("utf-8", "surrogatepass").encode(facts.encoding, "surrogatepass")


def _copy(body: _Body, start: int, end: int, facts: FileFacts) -> Iterator[bytes]:
    if body.wide:
        yield _out(bytes(body.data[start:end]), body, facts)
        return
    for lo in range(start, end, CHUNK):
        yield body.data[lo : min(end, lo + CHUNK)]


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.MULTILINE)


def _shift_hunks(diff: str, by: int) -> str:
    """A diff of a snippet renumbered as lines of the file (the snippet starts at ``by + 1``)."""
    def shift(m: re.Match[str]) -> str:
        return (f"@@ -{int(m.group(1)) + by}{m.group(2) or ''} "
                f"+{int(m.group(3)) + by}{m.group(4) or ''} @@")
    return _HUNK.sub(shift, diff)


def _snippets(
    body: _Body, offsets: list[int], lines: list[int], needle: bytes, replacement: bytes,
    facts: FileFacts, path: str,
) -> tuple[list[str], str, bool]:
    enc = _search_facts(body, facts)
    shown: list[str] = []
    diffs: list[str] = []
    cut = False
    for off, line in list(zip(offsets, lines))[:_MAX_SNIPPETS]:
        lo = body.line_start(off, _CONTEXT_LINES)
        # A match ending in a newline ends on that newline's line, not the next one.
        end = off + len(needle) - (1 if needle.endswith(body.nl) else 0)
        hi = body.line_end(max(end, off), _CONTEXT_LINES)
        before = display(bytes(body.data[lo:hi]), enc)
        after = display(
            bytes(body.data[lo:off]) + replacement + bytes(body.data[off + len(needle) : hi]), enc
        )
        first = line - body.count_newlines(lo, off)
        if body.nl == b"\r":
            rows = after.split("\r")
        else:
            rows = [text.rstrip("\r") for text in after.split("\n")]
        cut |= any(len(text) > _SNIPPET_LINE_CHARS for text in rows)
        numbered = [f"{first + i:>6}\t{_cut(text)}" for i, text in enumerate(rows)]
        if len(numbered) > _SNIPPET_MAX_LINES:
            cut = True
            tail = _SNIPPET_MAX_LINES - _SNIPPET_HEAD_LINES
            hidden = len(numbered) - _SNIPPET_MAX_LINES
            gap = (f"[... {hidden} lines not shown; read the file with offset "
                   f"{first + _SNIPPET_HEAD_LINES} to see them ...]")
            numbered = numbered[:_SNIPPET_HEAD_LINES] + [gap] + numbered[-tail:]
        shown.append("\n".join(numbered))
        diffs.append(_shift_hunks(text_diff(before, after, path, path), first - 1))
    return shown, bound_diff("\n".join(diffs)), cut


def _cut(line: str) -> str:
    if len(line) <= _SNIPPET_LINE_CHARS:
        return line
    return line[:_SNIPPET_LINE_CHARS] + TRUNCATED_LINE


def _ranges(lines: list[int]) -> str:
    text = ", ".join(str(n) for n in lines[:_MAX_LISTED])
    return text + (f" and {len(lines) - _MAX_LISTED} more" if len(lines) > _MAX_LISTED else "")


# -- no match: the nearest candidate and why it differs ----------------------


def _no_match(args: EditArgs, ctx: ToolContext, path: str, body: _Body, facts: FileFacts) -> ToolFailure:
    old = args.old_string
    base = f"old_string was not found in {path}; nothing was changed."
    if body.end - body.start > ctx.settings.fuzzy_max_file_bytes:
        return ToolFailure(
            "no_match",
            f"{base} The file is too large to search for a near match; grep for a distinctive "
            "line of old_string, read around it, and copy the text exactly.",
        )
    enc = _search_facts(body, facts)
    # Compared as the model sees both: the file's uniform line ending as \n.  A
    # mixed-ending file is compared as it is, so a CRLF/LF difference is named.
    text = facts.to_model_text(display(bytes(body.data[body.start : body.end]), enc))
    old = facts.to_model_text(facts.to_file_text(old))
    file_lines = text.split("\n")
    want = old.split("\n")
    k = min(len(want), _WINDOW_MAX_LINES)
    probe = "\n".join(want[:k])
    if len(file_lines) < k:
        windows = ["\n".join(file_lines)]
    else:
        windows = ["\n".join(file_lines[i : i + k]) for i in range(len(file_lines) - k + 1)]
    from rapidfuzz import fuzz, process  # lazily: only a failed match pays its import

    best = process.extractOne(probe, windows, scorer=fuzz.ratio, score_cutoff=40)
    if best is None:
        return ToolFailure(
            "no_match",
            f"{base} No similar text exists in the file either, so your picture of it is wrong. "
            "Read the file again (or grep for a distinctive word) and copy the text exactly.",
        )
    _, score, index = best
    candidate = "\n".join(file_lines[index : index + len(want)])
    reason = _why_different(old, candidate, facts)
    shown = "\n".join(
        f"{index + 1 + i:>6}\t{_visible(line)}"
        for i, line in enumerate(file_lines[index : index + len(want)][:20])
    )
    first_bad = _first_difference(old, candidate)
    message = (
        f"{base} The closest text is at lines {index + 1}-{index + len(want)} "
        f"({score:.0f}% similar)"
        + (f": {reason}" if reason else "")
        + (f". First difference: {first_bad}" if first_bad and not reason else "")
        + ".\nCandidate (tabs shown as →, carriage returns as ␍):\n"
        + shown
        + "\nCopy the exact text from the file into old_string and retry."
    )
    return ToolFailure(
        "no_match",
        message,
        details={"candidate_line": index + 1, "similarity": round(score, 1), "reason": reason},
    )


def _visible(line: str) -> str:
    return line.replace("\t", "→").replace("\r", "␍")


def _first_difference(old: str, candidate: str) -> str | None:
    for i, (a, b) in enumerate(zip(old.split("\n"), candidate.split("\n"))):
        if a != b:
            return f"line {i + 1} of old_string is {a!r} but the file has {b!r}"
    return None


def _why_different(old: str, cand: str, facts: FileFacts) -> str | None:
    def lines(s: str) -> list[str]:
        return s.split("\n")

    if cand.endswith("\r") and not old.endswith("\r"):
        cand = cand[:-1]  # the CR of the last line's CRLF lies outside old_string
    if old == cand and facts.lossy and "\ufffd" in old:
        return ("old_string contains U+FFFD where the file has an invalid byte; edit around that "
                "spot, since the byte cannot be typed")
    if old.replace("\r\n", "\n") == cand.replace("\r\n", "\n"):
        if "\r\n" in cand and "\r\n" not in old:
            return ("line endings differ: the file uses CRLF (\\r\\n) and old_string uses LF "
                    "(\\n); write \\r\\n at each line end in old_string")
        return ("line endings differ: old_string uses CRLF (\\r\\n) but the file uses LF (\\n) "
                "here; use \\n")
    if old.lstrip("\ufeff") == cand.lstrip("\ufeff"):
        return ("old_string starts with a byte-order mark (U+FEFF) that is not part of the "
                "text; leave it out")
    for size in (2, 4, 8):
        if [s.expandtabs(size) for s in lines(old)] == [s.expandtabs(size) for s in lines(cand)]:
            if "\t" in cand and "\t" not in old:
                return "tabs vs spaces: the file indents with tabs where old_string has spaces"
            return "tabs vs spaces: the file indents with spaces where old_string has tabs"
    if [s.rstrip() for s in lines(old)] == [s.rstrip() for s in lines(cand)]:
        return "trailing whitespace differs at the end of some lines"
    if [s.strip() for s in lines(old)] == [s.strip() for s in lines(cand)]:
        return "indentation differs: the text matches but the leading whitespace does not"
    if facts.lossy and "\ufffd" in old:
        return ("old_string contains U+FFFD where the file has an invalid byte; edit around that "
                "spot, since the byte cannot be typed")
    return None
