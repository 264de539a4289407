"""The image builder's one error, under the bundle package's root.

    BundleError (bundle._errors)
    └── ImageError    a recipe, a tool (debootstrap, mkfs.ext4) or a kernel piece is
                      missing or wrong; the message names what to install or fix

It joins the root so a caller catching ``BundleError`` (every ``abhed
bundle`` verb) also reports an image that cannot be built, instead of a
traceback.
"""

from __future__ import annotations

from bundle._errors import BundleError

__all__ = ["ImageError"]


class ImageError(BundleError):
    """Raised when an image cannot be built; the message says what to do."""
