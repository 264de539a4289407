"""Path rules every tool keeps: absolute in, resolved beneath the workspace.

Resolution is done one component at a time from an open directory descriptor
of the workspace root, opening each directory with ``O_NOFOLLOW``.  A symlink
met on the way is read with ``readlink`` and its target re-checked against the
root before the walk restarts from the root descriptor.  Because every step is
relative to a descriptor we already hold, a directory swapped for a symlink
between our check and our open makes the open fail (``ELOOP``) instead of
escaping: this is ``openat2(RESOLVE_BENEATH)`` done in user space, since
Python exposes no binding for it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from foundation import is_within
from tools._result import ToolFailure
from tools.pathpattern import PathRules

__all__ = ["Located", "SecretMatcher", "Workspace", "shorten"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_SYMLINK_HOPS = 40
# Linux PATH_MAX and NAME_MAX, in bytes: longer paths can never name a file,
# so they are refused up front instead of surfacing as ENAMETOOLONG later.
_MAX_PATH_BYTES = 4095
_MAX_NAME_BYTES = 255
_SHOWN_CHARS = 200


def shorten(text: str, limit: int = _SHOWN_CHARS) -> str:
    """``text`` cut in the middle to at most ``limit`` characters, for echoing model input."""
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]}[...]{text[-half:]}"


@dataclass
class Located:
    """A resolved path: an open descriptor of its parent and its final name.

    ``path`` is the canonical absolute path (symlinks expanded).  ``exists``
    tells whether the final component exists.  Close with :meth:`close`.
    """

    dir_fd: int
    name: str
    path: str
    exists: bool
    st: os.stat_result | None

    def close(self) -> None:
        os.close(self.dir_fd)

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SecretMatcher:
    """Decides whether a workspace-relative path is a secret, in the one path-pattern dialect.

    The rules are :class:`tools.pathpattern.PathRules`: gitignore's, the last
    matching pattern deciding (docs/tools.md, "Path patterns").
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.rules = PathRules(patterns)

    def match(self, rel_path: str) -> str | None:
        """The pattern that makes ``rel_path`` secret, or ``None``."""
        return self.rules.match(rel_path)


class Workspace:
    """The root every tool path must resolve beneath."""

    def __init__(self, root: str, secret_paths: Iterable[str] = ()) -> None:
        if not os.path.isabs(root):
            root = os.path.abspath(root)
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ValueError(f"workspace {root!r} is not a directory")
        self.root = real
        self.secrets = SecretMatcher(secret_paths)

    # -- lexical rules ---------------------------------------------------
    def absolute(self, user_path: str, *, field: str = "path") -> str:
        """Check a path the model gave: absolute, no NUL, lexically inside the root."""
        if not isinstance(user_path, str) or not user_path:
            raise ToolFailure("invalid_path", f"`{field}` is empty. Give an absolute path inside {self.root}.")
        if "\x00" in user_path:
            raise ToolFailure("invalid_path", f"`{field}` contains a NUL byte, which no file name can hold.")
        try:
            size = len(os.fsencode(user_path))
        except UnicodeEncodeError as exc:
            raise ToolFailure(
                "invalid_path",
                f"`{field}` contains {exc.object[exc.start:exc.end]!r} at position {exc.start}, a lone "
                "surrogate that no file name can hold. Use the path exactly as glob returns it.",
            ) from None
        if size > _MAX_PATH_BYTES:
            raise ToolFailure(
                "path_too_long",
                f"`{field}` is {size} bytes long ({shorten(user_path)!r}); paths hold at most "
                f"{_MAX_PATH_BYTES} bytes, so no such file can exist. Use glob to find the real path.",
            )
        if not os.path.isabs(user_path):
            suggestion = os.path.normpath(os.path.join(self.root, user_path))
            raise ToolFailure(
                "relative_path",
                f"`{field}` must be an absolute path; got relative path {shorten(user_path)!r}. "
                f"Relative to the workspace root that is {shorten(suggestion)!r}: call again with that.",
                details={"suggestion": suggestion},
            )
        norm = os.path.normpath(user_path)
        if norm.startswith("//"):
            norm = "/" + norm.lstrip("/")
        if not self.contains(norm):
            raise ToolFailure(
                "outside_workspace",
                f"{shorten(user_path)!r} resolves to {shorten(norm)!r}, which is outside the workspace "
                f"{self.root}. Tools only reach files beneath the workspace root.",
            )
        for comp in norm.split("/"):
            if len(os.fsencode(comp)) > _MAX_NAME_BYTES:
                raise ToolFailure(
                    "name_too_long",
                    f"`{field}` has a component {len(os.fsencode(comp))} bytes long "
                    f"({shorten(comp)!r}); file names hold at most {_MAX_NAME_BYTES} bytes, so no such "
                    "file can exist. Use glob to find the real path.",
                )
        return norm

    def contains(self, abs_path: str) -> bool:
        """Whether ``abs_path`` (absolute, normalized) is the root or lies beneath it."""
        return is_within(abs_path, self.root)

    def relative(self, abs_path: str) -> str:
        if abs_path == self.root:
            return ""
        return abs_path[len(self.root.rstrip("/")) + 1 :]

    def secret_reason(self, abs_path: str) -> str | None:
        return self.secrets.match(self.relative(abs_path))

    def refuse_secret(self, abs_path: str, *, action: str = "read") -> None:
        pattern = self.secret_reason(abs_path)
        if pattern is not None:
            raise ToolFailure(
                "secret_path",
                f"Refused to {action} {abs_path}: it matches the secret-path rule {pattern!r} set by the "
                "operator, so its contents never enter the conversation. Work without it, or ask the "
                "user to share the specific non-secret values you need.",
            )

    # -- resolution ------------------------------------------------------
    def locate(self, user_path: str, *, field: str = "path", follow_final: bool = True) -> Located:
        """Resolve ``user_path`` beneath the root; the parent directory must exist.

        Raises ``ToolFailure`` for relative paths, escapes (lexical or through
        symlinks), a missing parent directory and permission problems.
        """
        logical = self.absolute(user_path, field=field)
        hops = 0
        while True:
            rel = self.relative(logical)
            parts = [p for p in rel.split("/") if p]
            if not parts:
                # The root itself: its parent is outside, so locate it as ".".
                fd = self._open_root()
                return Located(fd, ".", self.root, True, os.fstat(fd))
            fd = self._open_root()
            restarted = False
            try:
                walked: list[str] = []
                for comp in parts[:-1]:
                    try:
                        nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                    except OSError as exc:
                        target = self._symlink_target(fd, comp, exc, walked, user_path)
                        if target is None:
                            raise self._walk_error(exc, walked + [comp], user_path) from None
                        logical = self._rejoin(target, parts[len(walked) + 1 :], user_path)
                        restarted = True
                        break
                    os.close(fd)
                    fd = nfd
                    walked.append(comp)
                if restarted:
                    os.close(fd)
                    fd = -1
                else:
                    name = parts[-1]
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        return Located(fd, name, self._join(walked + [name]), False, None)
                    except PermissionError:
                        raise ToolFailure(
                            "permission_denied",
                            f"Permission denied looking up {self._join(walked + [name])}.",
                        ) from None
                    if stat.S_ISLNK(st.st_mode) and follow_final:
                        link = self._readlink(fd, name, walked + [name])
                        logical = self._rejoin_link(walked, link, [], user_path, name=name)
                        os.close(fd)
                        fd = -1
                    else:
                        return Located(fd, name, self._join(walked + [name]), True, st)
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                raise
            hops += 1
            if hops > _MAX_SYMLINK_HOPS:
                raise ToolFailure(
                    "symlink_loop",
                    f"{user_path} goes through more than {_MAX_SYMLINK_HOPS} symlinks (a loop?). "
                    "Use the real path of the file instead.",
                )

    def _open_root(self) -> int:
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ToolFailure(
                "workspace_unavailable",
                f"The workspace root {self.root} cannot be opened ({exc.strerror}): it was removed, "
                "replaced or its permissions changed. No file tool can work until it is back; tell "
                "the user.",
            ) from None

    def _join(self, parts: list[str]) -> str:
        return os.path.join(self.root, *parts) if parts else self.root

    def _symlink_target(
        self, fd: int, comp: str, exc: OSError, walked: list[str], user_path: str
    ) -> str | None:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            return None
        try:
            st = os.stat(comp, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            return None
        link = self._readlink(fd, comp, walked + [comp])
        return self._rejoin_link(walked, link, [], user_path, name=comp)

    def _readlink(self, fd: int, name: str, parts: list[str]) -> str:
        # The link was seen a moment ago; if it is gone or replaced now, someone
        # is changing the tree under us: say so instead of crashing.
        try:
            return os.readlink(name, dir_fd=fd)
        except OSError:
            raise ToolFailure(
                "changed_during_call",
                f"{self._join(parts)} changed while its path was being resolved; retry.",
                retryable=True,
            ) from None

    def _rejoin_link(
        self, walked: list[str], link: str, rest: list[str], user_path: str, *, name: str
    ) -> str:
        base = self._join(walked)
        target = os.path.normpath(link if os.path.isabs(link) else os.path.join(base, link))
        full = os.path.normpath(os.path.join(target, *rest)) if rest else target
        if not self.contains(target):
            raise ToolFailure(
                "symlink_escape",
                f"{user_path} passes through a symlink ({self._join(walked + [name])} -> {link}) "
                f"that points outside the workspace {self.root}. Tools do not follow links out of "
                "the workspace.",
            )
        return full

    def _rejoin(self, target: str, rest: list[str], user_path: str) -> str:
        full = os.path.normpath(os.path.join(target, *rest)) if rest else target
        if not self.contains(full):
            raise ToolFailure(
                "outside_workspace",
                f"{user_path} resolves to {full}, outside the workspace {self.root}.",
            )
        return full

    def _walk_error(self, exc: OSError, parts: list[str], user_path: str) -> ToolFailure:
        where = self._join(parts)
        if exc.errno == errno.ENOENT:
            parent = os.path.dirname(where)
            return ToolFailure(
                "parent_not_found",
                f"Directory {where} does not exist, so {user_path} cannot exist. "
                f"Use glob from {parent} to see what is there.",
            )
        if exc.errno == errno.ENOTDIR:
            return ToolFailure(
                "not_a_directory",
                f"{where} is a file, not a directory, so {user_path} cannot exist beneath it.",
            )
        if exc.errno == errno.EACCES:
            return ToolFailure("permission_denied", f"Permission denied entering {where}.")
        return ToolFailure("io_error", f"Could not open {where}: {exc.strerror}.", retryable=True)
