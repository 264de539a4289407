"""Names that load on first use (PEP 562), for every package in ``appliance``.

Each package's ``__init__`` keeps three things the tools need to see
literally: the ``TYPE_CHECKING`` imports (mypy), the ``_EXPORTS`` map (public
name to the private module defining it) and a literal ``__all__`` (mypy reads
re-exports from it).  What happens at run time is the same for all of them,
so it lives here once: importing a package costs nothing until a name is used,
which is what keeps ``abhed --help`` fast (see ``appliance/__init__.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, exports: Mapping[str, str],
               namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` for ``package``, whose globals are ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
