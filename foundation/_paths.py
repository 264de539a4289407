"""Paths and roots: whether a path lies inside a root, and a named path beneath one.

Both are spelled once here.  :func:`is_within` is the one comparison of a path
with a root; :class:`under` is the one way a class names a fixed file or folder
beneath a root it holds (the installer's prefix, the site CA's folder, a microVM
image, the site layer), where each had written a property per name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn, overload

__all__ = ["is_within", "under"]


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True when ``path`` is ``root`` or lies beneath it, compared as written.

    Both must be absolute and already normalized (resolved, if symlinks matter):
    this compares components, never touching the disk, so ``/ws-other`` is not
    inside ``/ws`` and ``/`` contains every absolute path.
    """
    p, r = os.fspath(path), os.fspath(root)
    if r != "/":
        r = r.rstrip("/")
    return p == r or p.startswith(r if r.endswith("/") else r + "/")


class under:  # lower case, as ``property``: it is read as one
    """A read-only attribute: the path ``names`` make beneath the root another attribute holds.

    ``current = under("current", root="prefix")`` in a class body is what
    ``@property def current(self) -> Path: return self.prefix / "current"`` was:
    the path is computed on each read (so it follows the root), it cannot be
    assigned, and on the class itself the descriptor is returned.  Why a
    descriptor and not the property: a class with several such names (the
    installer's layout has eight) said the same three lines for each, and a
    newcomer had to read every one to see that none did more; here each name is
    one line, and the table of names is the class body.  Why a typed descriptor
    and not a table of names looked up by a method: mypy (strict) types each
    attribute as ``Path`` on an instance, and the attribute names stay as they
    were for every caller.
    """

    __slots__ = ("_attr", "_names", "_root")

    def __init__(self, *names: str, root: str) -> None:
        self._names = names
        self._root = root
        self._attr = ""

    def __set_name__(self, owner: type[Any], attr: str) -> None:
        self._attr = attr

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> under: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> Path: ...
    def __get__(self, instance: object, owner: type[Any] | None = None) -> under | Path:
        if instance is None:
            return self
        return Path(getattr(instance, self._root), *self._names)

    def __set__(self, instance: object, value: object) -> NoReturn:
        raise AttributeError(f"{self._attr} is {self!r}, a path beneath {self._root}: "
                             "it cannot be set")

    def __repr__(self) -> str:
        names = ", ".join(repr(n) for n in self._names)
        return f"under({names}, root={self._root!r})"
