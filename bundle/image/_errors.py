"""The image builder's one error.

    ImageError    a recipe, a tool (debootstrap, mkfs.ext4) or a kernel piece is
                  missing or wrong; the message names what to install or fix
"""

from __future__ import annotations

__all__ = ["ImageError"]


class ImageError(Exception):
    """Raised when an image cannot be built; the message says what to do."""
