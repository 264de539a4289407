"""write: create a file, or replace one the session has seen, atomically."""

from __future__ import annotations

import hashlib
import os
import stat
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
from tools._paths import Located
from tools._result import ToolFailure, ToolResult, success
from tools._text_files import FileFacts, atomic_write, display, encode, encode_new
from tools._tool import Args, Tool, ToolContext

__all__ = ["Write", "WriteArgs"]

_DIFF_MAX_BYTES = 1 << 20


class WriteArgs(Args):
    path: str = Field(description="Absolute path of the file to create or replace.")
    content: str = Field(description="The complete file content.")


class Write(Tool):
    name = "write"
    description = (
        "Create a file, or replace an existing file's entire content. For changing part of an "
        "existing file use edit instead: it is safer and cheaper. Overwriting requires that you "
        "read the file in this session and that it has not changed since. Parent directories "
        "must already exist. The write is atomic (a crash never leaves half a file); an existing "
        "file keeps its mode, encoding, byte-order mark and CRLF line endings. Returns whether "
        "the file was created or overwritten and the bytes written; writing the content the "
        "file already has changes nothing and says so. Path must be absolute, inside the workspace."
    )
    args_model = WriteArgs
    capabilities = frozenset({"fs:write"})
    mutates = True

    def check(self, args: WriteArgs, ctx: ToolContext) -> None:
        loc = locate_for_check(ctx, args.path)
        if loc is None:
            _check_size(ctx, ctx.workspace.absolute(args.path),
                        len(encode_new(args.content, what="content")))
            return
        with loc:
            prepared = _prepare(args, ctx, loc)
            if prepared.fd is not None:
                os.close(prepared.fd)

    def preview(self, args: WriteArgs, ctx: ToolContext) -> str | None:
        """The unified diff against the file on disk (every line added for a new file)."""
        loc = locate_for_check(ctx, args.path)
        if loc is None:
            return _new_diff(ctx.workspace.absolute(args.path), args.content)
        with loc:
            p = _prepare(args, ctx, loc)
            if p.fd is None:
                return _new_diff(loc.path, args.content)
            assert p.facts is not None
            try:
                return _diff(p.fd, p.facts, p.content, loc.path)
            finally:
                os.close(p.fd)

    def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        with locate_for_write(ctx, args.path) as loc:
            p = _prepare(args, ctx, loc)
            if p.fd is None:
                written = atomic_write(loc.dir_fd, loc.name, loc.path, [p.data],
                                       mode=ctx.settings.new_file_mode)
                digest = hashlib.sha256(p.data).hexdigest()
                lines = _line_count(args.content)
                return success(
                    f"Created {loc.path} ({written} bytes, {lines} lines).",
                    path=loc.path, created=True, changed=True, bytes_written=written,
                    sha256_after=digest, file_state={"path": loc.path, "sha256": digest},
                )
            assert p.facts is not None
            facts = p.facts
            try:
                digest = hashlib.sha256(p.data).hexdigest()
                state = {"path": loc.path, "sha256": digest}
                if digest == facts.sha256:
                    return success(
                        f"No change: {loc.path} already has exactly this content ({len(p.data)} "
                        "bytes). Nothing was written.",
                        path=loc.path, created=False, changed=False, bytes_written=0,
                        sha256_after=digest, file_state=state,
                    )
                diff = _diff(p.fd, facts, p.content, loc.path)
                kept = keep_preimage(ctx, p.fd, loc.path, facts.size)
            finally:
                os.close(p.fd)
            assert loc.st is not None
            written = atomic_write(loc.dir_fd, loc.name, loc.path, [p.data],
                                   mode=stat.S_IMODE(loc.st.st_mode),
                                   owner=(loc.st.st_uid, loc.st.st_gid))
        notes = []
        if facts.bom or facts.encoding != "utf-8":
            notes.append(f"kept encoding {facts.encoding_label}")
        if p.converted:
            notes.append(f"line endings written as {facts.newline_label} like the original")
        extra = f"; {', '.join(notes)}" if notes else ""
        return success(
            f"Overwrote {loc.path} ({written} bytes, was {facts.size} bytes{extra}).",
            path=loc.path, created=False, changed=True, bytes_written=written,
            bytes_before=facts.size, sha256_before=facts.sha256, sha256_after=digest,
            file_state=state, diff=diff, crlf_converted=p.converted, artifacts=kept,
        )


@dataclass
class _Prepared:
    """What write will put where: the bytes, and for an overwrite the open file and its facts."""

    data: bytes
    content: str
    fd: int | None = None  # open read descriptor of the existing file; the caller closes it
    facts: FileFacts | None = None
    converted: bool = False


def _prepare(args: WriteArgs, ctx: ToolContext, loc: Located) -> _Prepared:
    """Every check write makes before writing, shared by the run and the precheck."""
    check_target_dir(loc)
    if not loc.exists:
        data = encode_new(args.content, what="content")
        _check_size(ctx, loc.path, len(data))
        return _Prepared(data, args.content)
    fd, facts = check_overwrite(ctx, loc, tool="write")
    try:
        content = facts.to_file_text(args.content)  # one codec: \n is the file's line ending
        converted = content != args.content
        data = facts.bom + encode(content, facts, what="content")
        _check_size(ctx, loc.path, len(data))
    except BaseException:
        os.close(fd)
        raise
    return _Prepared(data, content, fd, facts, converted)


def _check_size(ctx: ToolContext, path: str, size: int) -> None:
    if size > ctx.settings.edit_max_file_bytes:
        raise ToolFailure(
            "too_large",
            f"The content for {path} is {size} bytes, over the {ctx.settings.edit_max_file_bytes}-"
            "byte limit for write. Nothing was written.",
        )


def _line_count(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _diff(fd: int, facts: FileFacts, new_text: str, path: str) -> str | None:
    """A unified diff for the UI and audit log, when both sides are small."""
    if facts.size > _DIFF_MAX_BYTES or len(new_text) > _DIFF_MAX_BYTES:
        return None
    old = os.pread(fd, facts.size, 0)[len(facts.bom):]
    old_text = display(old, facts)
    return bound_diff(text_diff(old_text, new_text, path, path))


def _new_diff(path: str, text: str) -> str | None:
    if len(text) > _DIFF_MAX_BYTES:
        return None
    return new_file_diff(path, text)
