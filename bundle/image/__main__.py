"""``python -m bundle.image build``: build (or find cached) the microVM image for a recipe.

Prints the image directory on stdout, progress on stderr.  Exit 1 with a
message that says what to install or fix when the build cannot proceed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bundle.image import ImageError, build_image, default_agent_source, default_cache_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bundle.image")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the image for a recipe (cached by input hash)")
    b.add_argument("--recipe", default="default", help="recipe name (test, default) or JSON path")
    b.add_argument("--cache", type=Path, default=None,
                   help=f"image cache folder (default {default_cache_dir()})")
    b.add_argument("--agent", type=Path, default=None, help="guest agent source to put in the image")
    args = parser.parse_args(argv)
    try:
        out = build_image(args.recipe, agent_source=args.agent or default_agent_source(),
                          cache_dir=args.cache,
                          log=lambda m: print(f"image: {m}", file=sys.stderr, flush=True))
    except ImageError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
