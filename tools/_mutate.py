"""Rules write and edit share: seen-before-change, unchanged-since, safe targets."""

from __future__ import annotations

import fcntl
import os
import stat
import time

from tools._paths import Located
from tools._result import ToolFailure
from tools._text_files import FileFacts, file_facts, open_regular_at
from tools._tool import ToolContext

__all__ = ["check_overwrite", "check_target_dir", "keep_preimage", "locate_for_check",
           "locate_for_write"]

#: Larger files are changed without a preimage: undo then refuses them, saying why.
PREIMAGE_MAX_BYTES = 32 * 1024 * 1024


def locate_for_write(ctx: ToolContext, user_path: str, *, create_parents: bool = True) -> Located:
    """Resolve a path to write, holding its directory's write lock until the caller closes it.

    Missing parents are created only when the operator allows it and the
    caller may create a file (``create_parents``; an edit of existing text may not).
    """
    loc = _resolve(ctx, user_path, create_parents=create_parents)
    if loc is None:
        _make_dirs(ctx, os.path.dirname(ctx.workspace.absolute(user_path)))
        loc = ctx.workspace.locate(user_path)
    try:
        _lock_and_restat(loc)
    except BaseException:
        loc.close()
        raise
    return loc


_LOCK_WAIT_S = 30.0


def _lock_and_restat(loc: Located) -> None:
    """Serialise Abhed's writers in one directory, then look at the target again.

    Between a writer's check (seen hash, or "does not exist yet") and its rename,
    another writer could replace the file: both would report success and one
    change would silently vanish.  An exclusive ``flock`` on the directory's
    descriptor, held until the descriptor is closed after the rename, makes
    check-and-replace one step for every Abhed process.  The target is
    re-examined under the lock, since it may have changed while we waited.
    """
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(loc.dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ToolFailure(
                    "busy",
                    f"Another Abhed call has been writing in {os.path.dirname(loc.path)} for over "
                    f"{_LOCK_WAIT_S:.0f} s; nothing was changed. Retry shortly.",
                    retryable=True,
                ) from None
            time.sleep(0.005)
        except OSError:
            break  # a file system without flock: keep the unlocked behaviour
    try:
        st = os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        loc.exists, loc.st = False, None
    else:
        loc.exists, loc.st = True, st


def locate_for_check(ctx: ToolContext, user_path: str, *, create_parents: bool = True) -> Located | None:
    """:func:`locate_for_write` without its side effects, for a precheck.

    Nothing is created and no lock is taken.  ``None`` means the parent
    directories are missing and the real call would create them: the target
    is a new file, so nothing about an existing one can be checked.
    """
    return _resolve(ctx, user_path, create_parents=create_parents)


def _resolve(ctx: ToolContext, user_path: str, *, create_parents: bool) -> Located | None:
    """The target located, or ``None`` when its missing parents are to be created.

    Every refusal (relative path, outside the workspace, parents missing and
    not to be created) is raised here, so a precheck and the real call give
    the same error from the same code.
    """
    ws = ctx.workspace
    try:
        return ws.locate(user_path)
    except ToolFailure as exc:
        if exc.code != "parent_not_found" or not create_parents:
            raise
        target = ws.absolute(user_path)
        parent = os.path.dirname(target)
        if not ctx.settings.create_parent_dirs:
            raise ToolFailure(
                "parent_not_found",
                f"Cannot create {target}: its directory {parent} does not exist, and write does not "
                "create directories (the operator has not enabled it). Check the path with glob; if "
                f"the directory is really wanted, create it first with bash (`mkdir -p {parent}`).",
            ) from None
        return None


def _make_dirs(ctx: ToolContext, directory: str) -> None:
    ws = ctx.workspace
    parts = [p for p in ws.relative(directory).split("/") if p]
    fd = os.open(ws.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for comp in parts:
            try:
                os.mkdir(comp, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=fd)
            except OSError as exc:
                raise ToolFailure(
                    "not_a_directory",
                    f"Cannot create directories for {directory}: {comp!r} exists and is not a plain "
                    f"directory ({exc.strerror}).",
                ) from None
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)


def check_target_dir(loc: Located) -> None:
    if loc.st is not None and stat.S_ISDIR(loc.st.st_mode):
        raise ToolFailure("is_directory", f"{loc.path} is a directory; give the path of a file.")
    if loc.st is not None and not stat.S_ISREG(loc.st.st_mode):
        raise ToolFailure(
            "not_a_regular_file",
            f"{loc.path} is not a regular file (device, socket or pipe); refusing to replace it.",
        )


def check_overwrite(ctx: ToolContext, loc: Located, *, tool: str) -> tuple[int, FileFacts]:
    """For an existing file: it was seen in this session, is unchanged since, and is writable.

    Returns an open read descriptor and the file's facts; the caller closes the descriptor.
    """
    ws = ctx.workspace
    assert loc.st is not None
    ws.refuse_secret(loc.path, action="overwrite")
    seen = ctx.ledger.seen_hash(loc.path)
    if seen is None:
        hint = (
            "then write the complete new content (or use edit to change part of it)"
            if tool == "write" else "then call edit again with text copied from what you read"
        )
        raise ToolFailure(
            "not_read",
            f"{loc.path} exists and you have not read it in this session. Read it first, {hint}. "
            "Changing a file you have not seen could destroy content.",
        )
    if not loc.st.st_mode & 0o222:
        raise ToolFailure(
            "read_only_file",
            f"{loc.path} is read-only (mode {stat.S_IMODE(loc.st.st_mode):04o}); it was not changed. "
            "If changing it is intended, ask the user, or make it writable with bash (chmod u+w).",
        )
    if not os.access(loc.name, os.W_OK, dir_fd=loc.dir_fd, follow_symlinks=False):
        # The mode has a write bit, but not for us.  The directory may still let
        # us replace the file by rename, which would silently take it over from
        # its owner: refuse instead, as the file's permissions intend.
        raise ToolFailure(
            "permission_denied",
            f"Permission denied: {loc.path} is not writable by the agent's user (owner uid "
            f"{loc.st.st_uid}, mode {stat.S_IMODE(loc.st.st_mode):04o}); it was not changed. Ask "
            "the user to change its permissions if changing it is intended.",
        )
    if loc.st.st_size > ctx.settings.edit_max_file_bytes:
        raise ToolFailure(
            "too_large",
            f"{loc.path} is {loc.st.st_size} bytes, over the {ctx.settings.edit_max_file_bytes}-byte "
            f"limit for {tool}. Change it with a command through bash instead.",
        )
    fd = open_regular_at(loc.dir_fd, loc.name, loc.path)
    try:
        facts = file_facts(fd)
    except BaseException:
        os.close(fd)
        raise
    if facts.sha256 != seen:
        os.close(fd)
        # A ledger shared with parallel subagents knows who wrote this content.
        who_fn = getattr(ctx.ledger, "changed_by", None)
        who = who_fn(loc.path, facts.sha256) if callable(who_fn) else None
        by = f"by {who}" if who else "by the user, a command or another tool"
        raise ToolFailure(
            "file_changed",
            f"{loc.path} changed since you last read it ({by}), so your view of it is stale and "
            "it was not changed. Read it again, then retry.",
            details={"seen_sha256": seen, "current_sha256": facts.sha256,
                     **({"changed_by": who} if who else {})},
        )
    return fd, facts


def keep_preimage(ctx: ToolContext, fd: int, path: str, size: int) -> list[dict[str, object]]:
    """Keep the file's current bytes as a session artifact, so the change can be undone.

    Returns the artifact list for the result's ``details`` (empty when the
    session keeps no artifacts or the file is too large to keep).
    """
    if ctx.artifacts is None or size > PREIMAGE_MAX_BYTES:
        return []
    chunks: list[bytes] = []
    offset = 0
    while True:
        block = os.pread(fd, 1 << 20, offset)
        if not block:
            break
        chunks.append(block)
        offset += len(block)
        if offset > PREIMAGE_MAX_BYTES:
            return []
    ref = ctx.artifacts.keep(b"".join(chunks), kind="preimage", source=path)
    return [ref] if ref is not None else []
