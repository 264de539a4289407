"""``python -m installer`` and the PyInstaller entry point of ``abhed-installer``."""

import sys

from installer._cli import main

if __name__ == "__main__":
    sys.exit(main())
