"""Helpers every test folder may use: waiting on a condition with a deadline; calls run side
by side in threads; a scratch directory another Unix user can pass through; a hard-linked
copy of a source tree; a real wheel; what this checkout's build scripts made (the built
installer, the router's Python)."""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]  # the checkout


def wait_for(cond: Callable[[], T], timeout_s: float = 30.0, *, poll_s: float = 0.02,
             what: str = "condition") -> T:
    """Poll ``cond`` until it returns something truthy; return that value.

    Tests never sleep for a fixed time (a slow CI machine makes that flaky, a
    fast one makes it wasteful): they wait on a condition, and a deadline turns
    "never" into a clear failure instead of a hung suite.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        pause.wait(poll_s)



def side_by_side(fn: Callable[[str], T], names: Sequence[str], timeout_s: float) -> dict[str, T]:
    """``fn(name)`` for every name at once, each in its own thread (two engineers on one
    host, say): the results by name.  A call that raised raises here; one still running
    after ``timeout_s`` is a ``TimeoutError`` (its thread is left to end on its own)."""
    pool = ThreadPoolExecutor(max_workers=len(names))
    try:
        started = {name: pool.submit(fn, name) for name in names}
        deadline = time.monotonic() + timeout_s
        return {name: future.result(max(0.0, deadline - time.monotonic()))
                for name, future in started.items()}
    finally:
        pool.shutdown(wait=False)

@contextmanager
def shared_scratch(prefix: str) -> Iterator[Path]:
    """A root-owned 0755 directory in /tmp, removed after: pytest's own tmp_path is 0700,
    so the unprivileged users of a shared-host test could not pass through it."""
    base = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def link_tree(src: str | os.PathLike[str], dst: Path) -> Path:
    """A copy of the source tree ``src`` at ``dst`` (hard links where the file system allows,
    copies elsewhere), without site-packages, bytecode or build configuration; made once
    (an existing ``dst`` is kept).  The grep tests and benchmarks search such trees."""
    if not dst.exists():
        def cp(s: str, d: str) -> None:
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)

        shutil.copytree(src, dst, symlinks=True, copy_function=cp,
                        ignore=shutil.ignore_patterns("site-packages", "__pycache__", "config-*"))
    return dst.resolve()


def make_wheel(directory: Path, name: str, version: str, files: dict[str, bytes], *,
               requires: tuple[str, ...] = ()) -> Path:
    """A real, installable pure-Python wheel of ``files`` (path in the wheel -> bytes) with
    its METADATA (and Requires-Dist ``requires``), WHEEL and RECORD, written reproducibly
    into ``directory``; its path."""
    dist = f"{name}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    files = {**files, f"{dist}.dist-info/METADATA": meta.encode(),
             f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                                        b"Tag: py3-none-any\n"}
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
              for p, d in files.items()]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join([*record, f"{dist}.dist-info/RECORD,,"])
                                         + "\n").encode()
    out = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for p, d in files.items():
            zf.writestr(zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0)), d)
    return out


def write_tiny_catalog(home: Path, weights: Path, served_name: str) -> None:
    """A catalog in ``home`` with one entry, ``tiny``, over an empty weights folder made at
    ``weights``: what a provider started on demand needs to name its model (no vLLM runs)."""
    import json

    from models import CatalogEntry, hash_weights

    weights.mkdir()
    (weights / "config.json").write_text("{}")
    entry = CatalogEntry(name="tiny", served_name=served_name, weights_dir=str(weights),
                         files=hash_weights(weights), tool_call_parser="hermes", max_model_len=2048)
    (home / "catalog.json").write_text(json.dumps({"models": [entry.model_dump(mode="json")]}))


def built_by(script: str, *args: str, timeout_s: float) -> str:
    """The last line ``scripts/<script>`` prints: the path of what it made (cached outside the
    checkout, so each run after the first on a machine is a cache hit)."""
    out = subprocess.run([str(ROOT / "scripts" / script), *args], check=True,
                         capture_output=True, text=True, timeout=timeout_s)
    return out.stdout.strip().splitlines()[-1]


def installer_argv() -> list[str]:
    """The built installer: ``ABHED_INSTALLER_BIN`` (a path, or e.g. "python -m installer"
    while developing), else ``scripts/build-installer --cached`` (PyInstaller)."""
    given = os.environ.get("ABHED_INSTALLER_BIN")
    if given:
        return shlex.split(given)
    return [built_by("build-installer", "--cached", timeout_s=1200)]


def router_python() -> str:
    """The Python that runs the vLLM project's router (``scripts/router-env``)."""
    return built_by("router-env", timeout_s=900)
