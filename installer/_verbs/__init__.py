"""One module per verb (as pipx does); each exposes ``run(args) -> int``."""
