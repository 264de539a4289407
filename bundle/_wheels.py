"""Resolve and fetch the wheel set for the TARGET host, not the build host.

Three steps, each with the tool that is right for it:

1. **Pins** (which versions).  ``uv pip compile --python-platform
   --python-version`` resolves for the target: it evaluates environment markers
   (``python_version``, ``platform_machine``) for the target's Python, where
   pip's ``--python-version`` only changes the tags it accepts and evaluates
   markers for the build host's own Python (pip 23-25; a cp311 host resolving
   for cp312 drops ``six`` and mis-pins others), and it ignores the build host's
   pip constraints files.  It is also ~15x faster (14 s against 4 min for vLLM's
   200 wheels here).  A site may instead give a complete pinned list (``lock``),
   as ``scripts/vllm-requirements.txt`` is for the CPU build.
2. **Files** (which wheel of each version, its URL, sha256 and size): the
   index's JSON listing (PEP 691, sizes from PEP 700), ranked as pip ranks
   them for the target (its CPython ABI, then abi3, then pure Python; the
   newest manylinux level the target's glibc meets first, since pip does not
   expand ``manylinux_2_28`` to the older levels), local ``find_links``
   directories first.  Only listings are fetched, no wheel: this is what
   ``--resolve-only`` prints.  (pip's ``install --dry-run --report`` gives the
   same answer, but took minutes on a loaded build host for 200 wheels, and
   follows that host's pip configuration.)
3. **Fetch**: each missing wheel into a content-addressed cache
   (``CACHE/wheels/sha256/<hex>``), checked against the lock's sha256 before it
   is kept, so an interrupted gather resumes where it stopped and nothing is
   fetched twice.

CUDA-linked extras that break a CPU install (torchvision, torchaudio,
torchcodec) are dropped from a CPU target's pins by rule, as
``scripts/vllm-env`` does.
"""

from __future__ import annotations

import concurrent.futures
import errno
import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from foundation import digest_file

from ._errors import SpecError
from ._spec import normalize

__all__ = ["CPU_EXCLUDED", "LockedWheel", "fetch_wheels", "lock_text", "pin_requirements",
           "compact_filename", "platform_tags", "read_pins", "select_files", "wheel_rank"]

CPU_EXCLUDED = ("torchvision", "torchaudio", "torchcodec")
"""Dropped from a CPU target: their CUDA-linked builds break transformers' imports."""

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")

Say = Callable[[str], None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class LockedWheel:
    """One wheel of the lock: the exact file for the target, and where it comes from."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None


def platform_tags(arch: str, glibc: str) -> list[str]:
    """Every platform tag a host with this glibc accepts, newest first (PEP 600 and legacy)."""
    m = re.fullmatch(r"2\.(\d+)", glibc)
    if not m:
        raise SpecError(f"glibc {glibc!r} is not a version like 2.28")
    minor = int(m.group(1))
    tags = [f"manylinux_2_{n}_{arch}" for n in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{arch}" for n, name in legacy.items() if n <= minor]
    return [*tags, f"linux_{arch}"]


def _run(argv: Sequence[str], what: str, timeout: float = 1800) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"{what} could not run: {exc}") from None
    if done.returncode != 0:
        tail = " | ".join(line for line in done.stderr.splitlines()
                          if line.strip() and not line.startswith("WARNING: Location"))[-1500:]
        raise SpecError(f"{what} failed (exit {done.returncode}): {tail}")
    return done.stdout


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]  # the PyPI wheel ships the binary

        return [str(uv.find_uv_bin())]
    except (ImportError, FileNotFoundError):
        raise SpecError("uv is needed to resolve wheels for another platform: pip install uv "
                        "on the build host (it is in abhed's dev extras)") from None


def pin_requirements(requirements: Sequence[str], *, python: str, arch: str, glibc: str,
                     accelerator: str, say: Say, constraints: Sequence[str] = (),
                     find_links: Sequence[Path] = (), index_url: str | None = None) -> list[str]:
    """``name==version`` for the whole closure of ``requirements`` on the target
    (held to ``constraints`` where they overlap)."""
    with tempfile.TemporaryDirectory(prefix="abhed-resolve-") as tmp:
        req = Path(tmp) / "requirements.in"
        req.write_text("\n".join(requirements) + "\n")
        extra: list[str] = []
        if constraints:
            cons = Path(tmp) / "constraints.txt"
            cons.write_text("\n".join(constraints) + "\n")
            extra += ["--constraint", str(cons)]
        for d in find_links:
            extra += ["--find-links", str(d)]
        if index_url:
            extra += ["--index-url", index_url]
        out = _run([*_uv(), "pip", "compile", str(req), *extra, "--python-platform",
                    f"{arch}-manylinux_{glibc.replace('.', '_')}", "--python-version", python,
                    "--only-binary", ":all:", "--no-header", "--no-annotate", "--quiet",
                    "--no-python-downloads", "--no-config"],
                   "uv pip compile (resolving for the target)")
    pins = [f"{m.group(1)}=={m.group(3)}" for line in out.splitlines()
            if (m := _PIN.match(line.strip()))]
    return exclude_for(pins, accelerator, say)


def read_pins(path: Path, accelerator: str, say: Say) -> list[str]:
    """A complete pinned list (``name==version`` lines, comments allowed)."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read the pinned wheel list {path}: {exc}") from None
    pins = []
    for n, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("--hash"):
            continue
        m = _PIN.match(line)
        if not m:
            raise SpecError(f"{path}:{n}: {line!r} is not name==version")
        pins.append(f"{m.group(1)}=={m.group(3)}")
    return exclude_for(pins, accelerator, say)


def exclude_for(pins: list[str], accelerator: str, say: Say) -> list[str]:
    if accelerator != "cpu":
        return pins
    dropped = [p for p in pins if normalize(p.split("==")[0]) in CPU_EXCLUDED]
    if dropped:
        say(f"wheels: CPU target: dropped {', '.join(dropped)} (CUDA-linked; they break "
            "transformers on a CPU host)")
    return [p for p in pins if p not in dropped]


_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<ver>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)"
                    r"-(?P<plat>[^-]+)\.whl$")


def wheel_rank(filename: str, python: str, plats: Sequence[str]) -> int | None:
    """How well a wheel fits the target (lower is better), or None when it does not install."""
    m = _WHEEL.match(filename)
    if not m:
        return None
    minor = int(python.split(".")[1])
    cp = f"cp3{minor}"
    best: int | None = None
    for py in m.group("py").split("."):
        for abi in m.group("abi").split("."):
            if abi == cp and py == cp:
                a = 0
            elif abi == "abi3" and py.startswith("cp3") and py[3:].isdigit() \
                    and int(py[3:]) <= minor:
                a = 1
            elif abi == "none" and (py in (cp, "py3", f"py3{minor}") or
                                    (py.startswith("py3") and py[3:].isdigit()
                                     and int(py[3:]) <= minor)):
                a = 2
            else:
                continue
            for plat in m.group("plat").split("."):
                if plat == "any":
                    p = len(plats)
                elif plat in plats:
                    p = plats.index(plat)
                else:
                    continue
                score = a * 1000 + p
                best = score if best is None or score < best else best
    return best


def compact_filename(filename: str, python: str, plats: Sequence[str], limit: int = 100) -> str:
    """The wheel's name with only its best tag for the target, when the name is over ``limit``.

    A bundle member's last path part must fit ustar's 100-byte name field; wheels with
    many compressed tags (``...manylinux1_x86_64.manylinux_2_28_x86_64.manylinux_2_5_x86_64``)
    do not.  Dropping the tags the target does not need keeps a valid wheel name that pip
    still installs (it reads the tags from the name; the content and its hash are unchanged).
    """
    m = _WHEEL.match(filename)
    if len(filename) <= limit or not m:
        return filename
    best: tuple[int, str] | None = None
    shortest = filename
    for py in m.group("py").split("."):
        for abi in m.group("abi").split("."):
            for plat in m.group("plat").split("."):
                name = f"{m.group('name')}-{m.group('ver')}-{py}-{abi}-{plat}.whl"
                shortest = min(shortest, name, key=len)
                rank = wheel_rank(name, python, plats)
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, name)
    # No tag fits the target (a wheel for another platform): the shortest valid name, so the
    # bundle still builds and the host's preflight names the mismatch, not the tar format.
    return best[1] if best is not None else shortest


_LISTING_MAX = 64 << 20
"""The most a project's listing may be, far above any project's on PyPI."""

RETRY_DELAYS_S = (0.5, 2.0, 5.0)
"""Waits before the 2nd, 3rd and 4th try of a request that failed for a passing reason.

A gather makes hundreds of requests, sixteen at a time; one lost DNS answer or one
503 from a mirror must not end it (pip and uv retry too).  What cannot pass (a 404,
a refused certificate, a name the resolver says does not exist) fails at once."""

_PASSING_HTTP = frozenset({408, 425, 429, 500, 502, 503, 504})
_PASSING_GAI = frozenset({socket.EAI_AGAIN} | ({socket.EAI_SYSTEM}
                                                if hasattr(socket, "EAI_SYSTEM") else set()))
_PASSING_ERRNO = frozenset({errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED,
                            errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH,
                            errno.EPIPE})


def passing(exc: BaseException) -> bool:
    """True when a request's failure may pass on its own: worth trying the request again."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in _PASSING_HTTP
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return passing(exc.reason)
    if isinstance(exc, socket.gaierror):
        return exc.errno in _PASSING_GAI
    if isinstance(exc, (TimeoutError, http.client.IncompleteRead,
                        http.client.RemoteDisconnected, ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return True  # (the last two: the connection dropped during or after the handshake)
    return isinstance(exc, OSError) and exc.errno in _PASSING_ERRNO


def _retrying(attempt: Callable[[], _T]) -> _T:
    """``attempt()``, tried again after each of :data:`RETRY_DELAYS_S` while it fails for a
    passing reason; the last failure, or one that cannot pass, is raised as it came."""
    for delay in (*RETRY_DELAYS_S, None):
        try:
            return attempt()
        except (OSError, http.client.HTTPException) as exc:
            if isinstance(exc, urllib.error.HTTPError):
                exc.close()  # its body is not read: the connection is let go now
            if delay is None or not passing(exc):
                raise
            time.sleep(delay)
    raise AssertionError("unreachable: the last try returns or raises")


def _whole(promised: str | None, got: int) -> None:
    """http.client ends a sized read quietly when the server hangs up early: a body shorter
    than its Content-Length is a cut connection (worth another try), not a bad listing
    or an altered file."""
    if promised is not None and promised.isdigit() and got < int(promised):
        raise http.client.IncompleteRead(b"", int(promised) - got)


def _index_files(index_url: str, name: str) -> list[dict[str, object]]:
    """A project's files from a PEP 691 (JSON) simple index: filename, url, hashes, size."""
    url = f"{index_url.rstrip('/')}/{normalize(name)}/"

    def listing() -> bytes:
        req = urllib.request.Request(url, headers={
            "accept": "application/vnd.pypi.simple.v1+json", "user-agent": "abhed-gather"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            promised = resp.headers.get("content-length")
            if promised is not None and promised.isdigit() and int(promised) > _LISTING_MAX:
                # Not a passing fault: asking again would fetch as much again.
                raise ValueError(f"its listing is {int(promised):,} bytes, over the "
                                 f"{_LISTING_MAX:,} a listing may be")
            body: bytes = resp.read(_LISTING_MAX)
            _whole(promised, len(body))
            return body

    try:
        data = json.loads(_retrying(listing))
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # A 404 is a name the index does not know; anything else, an index that did not
        # answer usably (down, cut off, not PEP 691 JSON, too large) after its tries.
        missing = isinstance(exc, urllib.error.HTTPError) and exc.code == 404
        raise SpecError(
            f"the index {index_url} does not list {name} ({exc}); check the name, or set "
            "[wheels] index_url" if missing else
            f"the index {index_url} gave no usable listing of {name} ({exc}); check that it "
            "answers (the network, a mirror), or set [wheels] index_url") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise SpecError(f"the index {index_url} gave no JSON file list for {name} (it must "
                        "speak PEP 691)")
    kept = []
    for f in files:
        if isinstance(f, dict) and isinstance(f.get("url"), str):
            try:
                f["url"] = urllib.parse.urljoin(url, f["url"])
            except ValueError:
                continue  # a file whose address is no URL cannot be fetched: not a candidate
        if isinstance(f, dict):
            kept.append(f)
    return kept


def _choose(pin: str, python: str, plats: Sequence[str], index_url: str,
            find_links: Sequence[Path]) -> LockedWheel:
    name, version = pin.split("==", 1)
    key = normalize(name)
    candidates: list[tuple[int, LockedWheel | Path]] = []
    for d in find_links:
        for local in sorted(d.glob("*.whl")) if d.is_dir() else []:
            m = _WHEEL.match(local.name)
            if m and normalize(m.group("name")) == key and m.group("ver") == version:
                rank = wheel_rank(local.name, python, plats)
                if rank is not None:
                    candidates.append((rank, local))
    if not candidates:
        for f in _index_files(index_url, name):
            filename = str(f.get("filename", ""))
            m = _WHEEL.match(filename)
            hashes = f.get("hashes")
            digest = hashes.get("sha256") if isinstance(hashes, dict) else None
            if not m or m.group("ver") != version or f.get("yanked") not in (None, False) \
                    or not isinstance(digest, str):
                continue
            rank = wheel_rank(filename, python, plats)
            if rank is not None:
                size = f.get("size")
                candidates.append((rank, LockedWheel(
                    name=key, version=version, filename=filename, url=str(f["url"]),
                    sha256=digest, size=size if isinstance(size, int) else None)))
    if not candidates:
        raise SpecError(f"no wheel of {pin} installs on the target (cp{python.replace('.', '')}, "
                        f"{plats[0]}): the target needs a wheel; pick another version or target")
    best = min(candidates, key=lambda c: c[0])[1]
    if isinstance(best, Path):
        return LockedWheel(name=key, version=version, filename=best.name,
                           url=best.resolve().as_uri(), sha256=digest_file(best).sha256,
                           size=best.stat().st_size)
    return best


def select_files(pins: Sequence[str], *, python: str, arch: str, glibc: str, say: Say,
                 index_url: str = "https://pypi.org/simple",
                 find_links: Sequence[Path] = ()) -> list[LockedWheel]:
    """The best wheel of each pin for the target, with its sha256 and size.

    Local ``find_links`` directories win (a site's own builds, e.g. torch+cpu); then
    the index's JSON listing (PEP 691, with PEP 700 sizes).  Ranked as pip ranks:
    the exact CPython ABI over abi3 over pure Python, the newest manylinux first.
    """
    plats = platform_tags(arch, glibc)
    # Executor.map's results cancel what has not started at the first failure: an index
    # that is down fails the gather once, not once per pin after each pin's retries.
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        chosen = list(pool.map(lambda p: _choose(p, python, plats, index_url, find_links), pins))
    say(f"resolve: {len(chosen)} wheels chosen "
        f"({sum(1 for w in chosen if w.url.startswith('file:'))} from local find-links)")
    return sorted(chosen, key=lambda w: w.name)


def lock_text(wheels: Sequence[LockedWheel]) -> str:
    """pip's hash-locked requirements, the format a bundle's ``[wheelhouse] lock`` checks."""
    return "".join(f"{w.name}=={w.version} --hash=sha256:{w.sha256}\n" for w in wheels)


def _download(w: LockedWheel, blobs: Path) -> None:
    """One wheel into the cache, checked against its locked sha256 before it is kept."""
    target = blobs / w.sha256
    partial = blobs / f"{w.sha256}.partial"
    try:
        scheme = urllib.parse.urlsplit(w.url).scheme
        req = urllib.request.Request(w.url, headers={"user-agent": "abhed-gather"})
    except ValueError as exc:
        raise SpecError(f"{w.filename}: its URL {w.url[:300]!r} is no URL ({exc})") from None
    if scheme not in ("https", "http", "file"):
        raise SpecError(f"{w.filename}: unsupported URL {w.url}")

    def fetch() -> str:
        """The whole file again on each try (the partial file is rewritten from byte 0)."""
        h = hashlib.sha256()
        got = 0
        with urllib.request.urlopen(req, timeout=120) as resp, open(partial, "wb") as out:
            promised = resp.headers.get("content-length")
            while chunk := resp.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
                got += len(chunk)
        _whole(promised, got)
        return h.hexdigest()

    try:
        digest = _retrying(fetch)
    except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: a bad URL
        partial.unlink(missing_ok=True)
        raise SpecError(f"{w.filename}: download failed ({exc}); run gather again: what "
                        "was fetched is kept") from None
    if digest != w.sha256:
        partial.unlink(missing_ok=True)
        raise SpecError(f"{w.filename}: sha256 {digest} differs from the lock's "
                        f"{w.sha256}: refused (the index or the network altered it)")
    os.replace(partial, target)


def fetch_wheels(wheels: Sequence[LockedWheel], cache: Path, dest: Path, *, say: Say,
                 python: str, plats: Sequence[str],
                 progress: Callable[[str, int, int], None] | None = None) -> tuple[int, int]:
    """Every locked wheel into ``dest`` (hard links into the cache, names that fit a bundle
    member: see :func:`compact_filename`); (fetched, reused)."""
    blobs = cache / "wheels" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    missing = [w for w in wheels if not (blobs / w.sha256).is_file()]
    if missing:
        say(f"wheels: downloading {len(missing)} of {len(wheels)} (the rest are cached)")
        total = sum(w.size or 0 for w in missing)
        done = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            for w, _ in zip(missing, pool.map(lambda w: _download(w, blobs), missing),
                            strict=True):
                done += w.size or 0
                if progress is not None:
                    progress("wheels", done, total)
    dest.mkdir(parents=True, exist_ok=True)
    for w in wheels:
        blob = blobs / w.sha256
        target = dest / compact_filename(w.filename, python, plats)
        target.unlink(missing_ok=True)
        try:
            os.link(blob, target)
        except OSError:
            shutil.copyfile(blob, target)
    return len(missing), len(wheels) - len(missing)
