"""An image recipe: which Debian userland, which kernel, which pinned versions.

A recipe is a small JSON file (``recipes/*.json``).  The image built from it
is keyed by the hash of the recipe *and* of everything else that goes into the
image (the guest agent, the initramfs init, the builder's own format version),
so a changed agent can never hide behind a cached image.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from bundle.image._errors import ImageError
from foundation import (
    FileMissing,
    parse_document,
    read_regular,
    reraised_as,
    validate_document,
)

__all__ = ["BUILD_FORMAT", "Recipe", "load_recipe", "recipe_path"]

# Bump when the builder's output changes for the same inputs.
BUILD_FORMAT = 1

_PKG = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_HERE = Path(__file__).resolve().parent


class Recipe(BaseModel):
    """What goes into one microVM image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")
    description: str = ""
    suite: str = Field(default="bookworm", pattern=r"^[a-z]+$")
    mirror: str = Field(
        default="http://deb.debian.org/debian",
        description="Debian mirror debootstrap reads; a snapshot.debian.org URL makes builds repeatable.",
    )
    packages: tuple[str, ...] = Field(
        default=(), description="Packages added to debootstrap's minbase (--include)."
    )
    pins: dict[str, str] = Field(
        default_factory=dict,
        description="package -> exact Debian version; the build fails if the mirror resolves another.",
    )
    kernel_package: str = Field(
        default="linux-image-cloud-amd64",
        description="Installed Debian kernel package whose vmlinuz and modules the image uses.",
    )
    slim: bool = Field(default=True, description="Drop docs, man pages, locales and apt lists.")

    def check(self) -> None:
        for pkg in (*self.packages, *self.pins, self.kernel_package):
            if not _PKG.match(pkg):
                raise ImageError(f"recipe {self.name}: {pkg!r} is not a Debian package name")


def recipe_path(name_or_path: str) -> Path:
    """A recipe file by path, or by name from the recipes shipped here."""
    path = Path(name_or_path)
    if path.suffix == ".json" or "/" in name_or_path:
        return path
    return _HERE / "recipes" / f"{name_or_path}.json"


MAX_RECIPE_BYTES = 1 << 20


def load_recipe(name_or_path: str) -> tuple[Recipe, bytes]:
    """The recipe and its exact bytes (hashed into the image key), read strictly."""
    path = recipe_path(name_or_path)
    with reraised_as(ImageError):
        try:
            raw = read_regular(path, MAX_RECIPE_BYTES, "recipe")
        except FileMissing as exc:
            shipped = ", ".join(sorted(p.stem for p in (_HERE / "recipes").glob("*.json")))
            raise ImageError(f"{exc}; shipped recipes: {shipped}") from None
        recipe = validate_document(parse_document(raw, what="recipe", source=path,
                                                  syntax="json"),
                                   Recipe, what="recipe", source=path)
    recipe.check()
    return recipe, raw


def input_key(recipe_bytes: bytes, *extra: bytes) -> str:
    h = hashlib.sha256()
    h.update(f"abhed-image-format-{BUILD_FORMAT}\0".encode())
    for part in (recipe_bytes, *extra):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:24]
