"""The microVM image the agent's shell runs in, built from a recipe.

Public surface: :func:`build_image` (build or reuse the cached image for a
recipe), :func:`load_recipe` / :class:`Recipe`, :func:`default_cache_dir`,
:func:`default_agent_source` and :class:`ImageError` (this subpackage's one
error).  Command line: ``python -m bundle.image build [--recipe test]``.
"""

from __future__ import annotations

from bundle.image._build import (
    IMAGE_FILES,
    build_image,
    default_agent_source,
    default_cache_dir,
    image_key,
)
from bundle.image._errors import ImageError
from bundle.image._recipe import Recipe, load_recipe

__all__ = [
    "IMAGE_FILES",
    "ImageError",
    "Recipe",
    "build_image",
    "default_agent_source",
    "default_cache_dir",
    "image_key",
    "load_recipe",
]

