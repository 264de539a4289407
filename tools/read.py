"""read: numbered lines of a text file, bounded, and remembered for edit safety."""

from __future__ import annotations

import io
import os
import stat
from typing import Annotated, Any

from pydantic import Field

from tools._near import missing_file_failure
from tools._result import ToolFailure, ToolResult, success
from tools._text_files import CHUNK, binary_kind, file_facts, open_regular_at
from tools._tool import ARTIFACT_PREFIX, Args, Tool, ToolContext

__all__ = ["MAX_LIMIT_LINES", "Read", "ReadArgs"]

TRUNCATED_LINE = "[...line truncated]"
# Files up to this size are decoded whole (fast path); larger ones stream.
_WHOLE_FILE_BYTES = 4 << 20
EMPTY_FILE = "[file exists but is empty]"
# The most lines one call may ask for; the output is bounded in characters too
# (ToolSettings.read_max_output_chars), so a file of long lines cannot fill a
# local model's context in one call.
MAX_LIMIT_LINES = 5000


class ReadArgs(Args):
    path: str = Field(description="Absolute path to the file.")
    offset: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="1-indexed line to start from. Use with limit for large files."
    )
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT_LINES)] | None = Field(
        default=None, description=f"Max lines to return. Default 2000, at most {MAX_LIMIT_LINES}."
    )


class Read(Tool):
    name = "read"
    description = (
        "Read a text file and get its lines numbered like `cat -n` (number, tab, line). "
        "Use it before editing or overwriting a file: edit and write refuse files you have not "
        "read in this session, or that changed since you read them. Prefer it over `cat` in "
        "bash: output is bounded and tracked. Returns at most 2000 lines by default (limit up "
        "to 5000) and at most 100,000 characters, and cuts lines longer than 2000 characters; "
        "when more remains, a final note says which lines were shown and the offset to page "
        "on from. Binary files (images, archives, "
        "executables) are refused with their type. Paths must be absolute and inside the "
        "workspace, except a session artifact (`abhed:artifact/...`, named in a truncation "
        "note: the whole output of a cut command), which pages the same way. Not for listing "
        "directories (use glob) or searching (use grep)."
    )
    args_model = ReadArgs
    capabilities = frozenset({"fs:read"})

    def check(self, args: ReadArgs, ctx: ToolContext) -> None:
        os.close(_open_text(args, ctx)[0])

    def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        settings = ctx.settings
        fd, path = _open_text(args, ctx)
        try:
            facts = file_facts(fd, keep_bytes=_WHOLE_FILE_BYTES)
            file_state = {"path": path, "sha256": facts.sha256}
            base: dict[str, Any] = {
                "path": path,
                **({} if path.startswith(ARTIFACT_PREFIX) else {"file_state": file_state}),
                "bytes": facts.size,
                "total_lines": facts.line_count,
                "encoding": facts.encoding_label,
                "line_ending": facts.newline_label,
            }
            if facts.line_count == 0:
                return success(EMPTY_FILE, **base, start_line=0, end_line=0)
            start = args.offset or 1
            limit = args.limit or settings.read_default_limit_lines
            # A CR-only file (classic Mac OS) is shown split at its CRs; every other
            # file at LF, a CR before it dropped.
            nl = "\r" if facts.newline == "\r" else "\n"
            if start > facts.line_count:
                raise ToolFailure(
                    "offset_out_of_range",
                    f"offset {start} is past the end of {path}, which has {facts.line_count} "
                    f"lines. Use an offset between 1 and {facts.line_count}.",
                    details={"total_lines": facts.line_count},
                )
            if facts.data is not None:
                lines, cut = _numbered_small(facts.data[len(facts.bom):],
                                             facts.encoding, start, limit,
                                             settings.read_max_line_chars, nl)
            else:
                lines, cut = _numbered_lines(fd, facts.encoding, bool(facts.bom), start, limit,
                                             settings.read_max_line_chars, nl)
        finally:
            os.close(fd)
        shown = _shown_artifact(path, ctx)
        if shown:
            # A masked read result kept as it was shown: its lines carry the file's own
            # numbers already, so they are not numbered a second time.
            lines = [line.split("\t", 1)[1] if "\t" in line else line for line in lines]
        lines, capped = _fit(lines, settings.read_max_output_chars)
        end = start + len(lines) - 1
        body = "\n".join(lines)
        truncated = end < facts.line_count
        if capped:
            body += (
                f"\n[truncated: showing lines {start}-{end} of {facts.line_count}; read returns "
                f"at most {settings.read_max_output_chars} characters per call. Use "
                f"offset={end + 1} to read on.]"
            )
        elif truncated:
            body += (
                f"\n[truncated: showing lines {start}-{end} of {facts.line_count}. "
                "Use offset/limit to read more.]"
            )
        if facts.newline == "\r\n":
            body += ("\n[note: this file uses CRLF line endings; they are shown as line breaks, "
                     "and edit and write keep them (\\n in old_string/new_string means CRLF)]")
        elif facts.newline == "\r":
            body += ("\n[note: this file uses CR line endings (classic Mac OS); they are shown as "
                     "line breaks, and edit and write keep them (\\n means CR)]")
        if shown:
            body += ("\n[this is an earlier read result as it was shown (the numbers are the "
                     "file's lines then); offset/limit count the lines of this text]")
        return success(body, truncated=truncated or bool(cut), **base, start_line=start,
                       end_line=end, long_lines_cut=[n for n in cut if n <= end],
                       output_capped=capped)


def _fit(lines: list[str], max_chars: int) -> tuple[list[str], bool]:
    """The leading lines whose output fits ``max_chars`` (always at least one), and whether
    any were left out."""
    total = 0
    for i, line in enumerate(lines):
        total += len(line) + 1
        if total > max_chars and i > 0:
            return lines[:i], True
    return lines, False


def _open_text(args: ReadArgs, ctx: ToolContext) -> tuple[int, str]:
    """Open the file for read, refusing all that read refuses before decoding it.

    Returns an open descriptor of a regular text file and its canonical path
    (the caller closes the descriptor).  Shared by :meth:`Read.run` and the
    precheck, so both give the same error.
    """
    ws = ctx.workspace
    if args.path.startswith(ARTIFACT_PREFIX):
        return _open_artifact(args.path, ctx)
    ws.refuse_secret(ws.absolute(args.path))
    with ws.locate(args.path) as loc:
        if not loc.exists:
            raise missing_file_failure(ctx, args.path, loc)
        ws.refuse_secret(loc.path)
        assert loc.st is not None
        if stat.S_ISDIR(loc.st.st_mode):
            raise ToolFailure(
                "is_directory",
                f"{loc.path} is a directory, not a file. Use glob with path={loc.path!r} to list it.",
            )
        if not stat.S_ISREG(loc.st.st_mode):
            raise ToolFailure(
                "not_a_regular_file",
                f"{loc.path} is not a regular file (a device, socket or pipe); read refuses it "
                "because reading could block or never end.",
            )
        fd = open_regular_at(loc.dir_fd, loc.name, loc.path)
    try:
        head = os.pread(fd, 8192, 0)
        kind = binary_kind(head)
        if kind is not None:
            raise ToolFailure(
                "binary_file",
                f"{loc.path} is a binary file ({kind}, {os.fstat(fd).st_size} bytes); read only "
                "returns text. Inspect it with a suitable command through bash if you must "
                "(e.g. `file`, `xxd | head`).",
                details={"binary_kind": kind},
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, loc.path


def _numbered_small(
    data: bytes, encoding: str, start: int, limit: int, max_chars: int, nl: str = "\n"
) -> tuple[list[str], list[int]]:
    """The same as :func:`_numbered_lines` for a file small enough to decode whole."""
    text = data.decode(encoding, "replace")
    rows = text.split(nl)
    if text.endswith(nl):
        rows.pop()
    window = rows[start - 1 : start - 1 + limit]
    if nl == "\n" and "\r" in text:
        window = [line.removesuffix("\r") for line in window]
    if max(map(len, window), default=0) <= max_chars:
        # The common case, kept to C-speed builtins: no line needs cutting.
        return [f"{n:>6}\t{line}" for n, line in enumerate(window, start)], []
    out: list[str] = []
    cut: list[int] = []
    for number, line in enumerate(window, start):  # CRs were already stripped above
        if len(line) > max_chars:
            out.append(f"{number:>6}\t{line[:max_chars]}{TRUNCATED_LINE}")
            cut.append(number)
        else:
            out.append(f"{number:>6}\t{line}")
    return out, cut


def _numbered_lines(
    fd: int, encoding: str, has_bom: bool, start: int, limit: int, max_chars: int,
    nl: str = "\n",
) -> tuple[list[str], list[int]]:
    """Return ``cat -n`` lines start..start+limit-1 and which of them were cut.

    Reads with ``readline(limit)`` so a single gigantic line never sits in
    memory whole; invalid bytes show as U+FFFD.
    """
    raw = io.FileIO(os.dup(fd), "rb")
    number = 0
    first = True
    if start > 1 and not encoding.startswith(("utf-16", "utf-32")):
        # In UTF-8 and Latin-1 every 0x0A byte is a line end, so the lines before
        # the window are skipped by counting bytes, not by decoding them: paging
        # to line 2,600,000 of a 100 MB file costs a second, not a minute.
        raw.seek(_line_offset(fd, start, nl.encode()))
        number = start - 1
        first = False
    text = io.TextIOWrapper(io.BufferedReader(raw, CHUNK), encoding=encoding, errors="replace",
                            newline=nl)
    out: list[str] = []
    cut: list[int] = []
    try:
        while len(out) < limit:
            piece = text.readline(max_chars + 1)
            if not piece:
                break
            if first and has_bom and piece.startswith("\ufeff"):
                piece = piece[1:]
            first = False
            number += 1
            complete = piece.endswith(nl)
            if not complete and len(piece) > max_chars:
                # Skip the rest of an over-long line without holding it.
                while True:
                    rest = text.readline(CHUNK)
                    if not rest or rest.endswith(nl):
                        break
                if number >= start:
                    out.append(f"{number:>6}\t{piece[:max_chars]}{TRUNCATED_LINE}")
                    cut.append(number)
                continue
            if number < start:
                continue
            line = piece[:-1] if complete else piece
            if nl == "\n" and line.endswith("\r"):
                line = line[:-1]
            if len(line) > max_chars:
                out.append(f"{number:>6}\t{line[:max_chars]}{TRUNCATED_LINE}")
                cut.append(number)
            else:
                out.append(f"{number:>6}\t{line}")
    finally:
        text.close()
    return out, cut


def _line_offset(fd: int, line: int, nl: bytes = b"\n") -> int:
    """Byte offset where 1-indexed ``line`` starts, found by counting ``nl`` bytes in chunks."""
    need = line - 1
    pos = 0
    while need:
        chunk = os.pread(fd, CHUNK, pos)
        if not chunk:
            break
        found = chunk.count(nl)
        if found < need:
            need -= found
            pos += len(chunk)
            continue
        idx = -1
        for _ in range(need):
            idx = chunk.index(nl, idx + 1)
        return pos + idx + 1
    return pos


def _shown_artifact(path: str, ctx: ToolContext) -> bool:
    """``path`` is an artifact holding a tool result as it was shown (already numbered)."""
    if not path.startswith(ARTIFACT_PREFIX) or ctx.artifacts is None:
        return False
    found = ctx.artifacts.find(path)
    return found is not None and found.kind == "shown"


def _open_artifact(ref: str, ctx: ToolContext) -> tuple[int, str]:
    """Open a blob this session kept (a cut output, a preimage): never another session's.

    A preimage is of a workspace file, so the secret-path rules apply to it
    as to the file itself.
    """
    found = ctx.artifacts.find(ref) if ctx.artifacts is not None else None
    if found is None:
        raise ToolFailure(
            "not_found",
            f"There is no artifact {ref[:120]!r} in this session. Artifact paths are given in "
            "truncation notes (\"The whole output is kept: ...\"); copy the path exactly.")
    if found.source:
        ctx.workspace.refuse_secret(found.source)
    try:
        fd = os.open(found.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        raise ToolFailure("io_error", f"The artifact {ref} could not be opened ({exc.strerror}).",
                          retryable=True) from None
    return fd, ref
