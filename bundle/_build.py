"""Build a bundle from a spec: gather, compress, describe, sign, write.

Reproducible by construction: members in a fixed order (components in spec
order, files sorted), tar headers with mtime 0 and owner 0, zstd at a fixed
level in its multi-threaded mode, canonical JSON, and Ed25519 (deterministic)
signatures.  The same inputs and keys give a byte-identical bundle, on any
number of cores: zstd's multi-threaded frames depend on the level and the
input, not on the worker count or on how the input is fed (its single-threaded
streaming mode, used before, depended on the read size; see
tests/bundle/test_build_speed.py).

The manifest must come first in the tar but lists every member's digest, so
building is two passes.  The first reads each input once, hashing it and
feeding zstd from the same buffer, and hashes the compressed stream as it is
written to a work directory beside the output.  The second writes the tar:
compressed members (our own work files) are copied by the kernel
(``copy_file_range``), inputs stored as they are are hashed again as they are
copied, refusing if one changed in between.  The output appears by an atomic
rename only when complete.
"""

from __future__ import annotations

import contextlib
import email.parser
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import tomllib
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import BinaryIO

from foundation import digest_file, usable_cpus

from ._errors import BundleError, SpecError
from ._manifest import (
    FORMAT,
    MANIFEST_NAME,
    SIGNATURE_NAME,
    Component,
    Input,
    Manifest,
    Member,
    Provenance,
    Reference,
    Roles,
    SiteInfo,
    manifest_json,
    parse_manifest,
)
from ._minisign import SecretKey
from ._model_kit import ModelKit, require_kit
from ._roles import agent_closure, check_provider_endpoints, with_relay_provider
from ._sbom import SbomComponent, SbomFile, render_sbom
from ._settings import (
    SETTINGS_MEMBER,
    SITE_FILES,
    SettingsCheck,
    check_carried,
    prepare_settings,
    release_dir,
    release_paths,
    settings_bytes,
    unexpand,
)
from ._spec import BuildSpec, WheelhouseSpec, load_spec, normalize, parse_lock
from ._tar import CHUNK, TarReader, end_of_archive, member_header, padding
from ._trust import sign_set
from ._wheels import compact_filename, platform_tags

__all__ = ["BuildProgress", "build_bundle", "build_project_wheel"]

BuildProgress = Callable[[str, int, int], None]
"""Called as ``progress(step, bytes_done, bytes_total)`` during long steps."""

SBOM_NAME = "sbom.cdx.json"
# Formats that are already compressed: zstd would spend time and save nothing.
_INCOMPRESSIBLE = (".whl", ".zip", ".gz", ".tgz", ".xz", ".bz2", ".zst", ".7z", ".png",
                   ".jpg", ".jpeg", ".gif", ".webp", ".squashfs")
_MIN_COMPRESS_BYTES = 4096
_KEEP_RATIO = 0.9  # keep the zstd form only when it saves at least 10%


def _builder_name() -> str:
    try:
        return f"abhed-bundle {version('abhed')}"
    except PackageNotFoundError:
        return "abhed-bundle"


@dataclass
class _Source:
    member: str  # member name before any .zst suffix
    path: Path
    label: str | None = None  # how provenance names the input, when not by its path
    known: tuple[str, int] | None = None  # (sha256, size) already taken while gathering


@dataclass
class _Part:
    kind: str
    name: str
    version: str | None
    sources: list[_Source]
    licence: str | None = None
    source: str | None = None
    purl: str | None = None
    root: Path | None = None  # a model's directory, which its signature covers


@dataclass
class _Prepared:
    member: Member
    path: Path  # where the stored bytes are (the input, or its compressed copy)
    ours: bool = False  # a work file this build wrote (and hashed as it wrote it)


def _resolve(base: Path, rel: str, what: str) -> Path:
    path = (base / rel) if not Path(rel).is_absolute() else Path(rel)
    if path.is_symlink():
        raise SpecError(f"{what} {path} is a symbolic link; name the file itself")
    if not path.is_file():
        raise SpecError(f"{what} {path} does not exist or is not a regular file")
    return path


def _wheel_info(path: Path) -> tuple[str, str, str | None]:
    """(name, version, licence) of a wheel, from its file name and METADATA."""
    parts = path.name[:-4].split("-")
    if not path.name.endswith(".whl") or len(parts) not in (5, 6):
        raise SpecError(f"{path.name} is not a wheel file name (PEP 427)")
    name, ver = parts[0], parts[1]
    licence: str | None = None
    try:
        with zipfile.ZipFile(path) as zf:
            meta = [n for n in zf.namelist()
                    if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if meta:
                with zf.open(meta[0]) as fh:
                    headers = email.parser.BytesParser().parsebytes(fh.read(1 << 20),
                                                                    headersonly=True)
                expr = headers.get("License-Expression") or headers.get("License")
                if expr and "\n" not in expr.strip() and len(expr) <= 100:
                    licence = expr.strip()
    except zipfile.BadZipFile:
        raise SpecError(f"{path} is not a valid wheel (bad zip)") from None
    return name, ver, licence


def build_project_wheel(project: Path, out: Path, source_date_epoch: int | None = None) -> Path:
    """The project's wheel, built into ``out`` with build folders of its own.

    setuptools builds in place through the project's ``build/lib`` and ``*.egg-info`` and
    never removes what an earlier build left there: a module since moved or deleted
    would ship in the agent wheel (seen: ten stale modules in a working checkout's
    wheel), and two builds of one checkout at once break each other.  distutils'
    ``DIST_EXTRA_CONFIG`` points this build's ``build_base`` and ``egg_base`` at a fresh
    folder instead, so the checkout is read, never written, and nothing earlier is seen.
    (Not a copy of the project: links out of the tree, sockets, a large checkout and
    version numbers taken from ``.git`` all go wrong in a copy.)  A backend other than
    setuptools reads no such file and keeps no such leftovers."""
    # bdist_wheel stamps zip entries with SOURCE_DATE_EPOCH when set: the same source then
    # gives the same wheel bytes (1980-01-01, the zip format's earliest date, by default).
    epoch = str(max(source_date_epoch or 0, 315532800))
    # Absolute: pip runs the backend in the project, where a relative DIST_EXTRA_CONFIG
    # names no file and setuptools would quietly build in the checkout again.
    project, out = project.resolve(), out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="abhed-agent-build-", dir=out) as tmp_name:
        tmp = Path(tmp_name).resolve()
        if any(c in str(tmp) for c in "\r\n"):
            raise SpecError(f"cannot build the agent wheel under {out!r}: a line break in "
                            "the path; choose another output folder")
        here = str(tmp).replace("%", "%%")  # setuptools reads the file with interpolation
        cfg = tmp / "build.cfg"
        cfg.write_text(f"[build]\nbuild_base = {here}/build\n[egg_info]\negg_base = {here}\n",
                       encoding="utf-8")
        # "local": the stdlib's distutils (SETUPTOOLS_USE_DISTUTILS=stdlib) reads no such file.
        env = dict(os.environ, SOURCE_DATE_EPOCH=epoch, DIST_EXTRA_CONFIG=str(cfg),
                   SETUPTOOLS_USE_DISTUTILS="local")
        built = tmp / "wheel"
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
               "--no-index", "--disable-pip-version-check", "-q", "-w", str(built),
               str(project)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env,
                              start_new_session=True)
        wheels = sorted(built.glob("*.whl")) if built.is_dir() else []
        if done.returncode != 0 or len(wheels) != 1:
            raise SpecError(f"building the agent wheel from {project} failed: "
                            f"{done.stderr.strip()[-400:] or 'no wheel produced'}")
        if _setuptools_backend(project) and not (tmp / "build").is_dir():
            raise SpecError(
                f"building the agent wheel from {project}: setuptools did not use the build "
                "folder it was given (setuptools older than 65.4, or the project sets "
                "build_base in pyproject.toml's [tool.distutils]), so what an earlier build "
                f"left in {project / 'build'} could have shipped; refused. Upgrade setuptools "
                "on the build host, or drop that setting")
        target = out / wheels[0].name
        os.replace(wheels[0], target)
    return target


def _setuptools_backend(project: Path) -> bool:
    """Whether setuptools builds ``project`` (its declared backend, or none: the default)."""
    try:
        system = tomllib.loads((project / "pyproject.toml").read_text("utf-8")).get(
            "build-system", {})
    except (OSError, ValueError):
        return True
    backend = system.get("build-backend") if isinstance(system, dict) else None
    return not isinstance(backend, str) or backend.startswith("setuptools")


def _gather(spec: BuildSpec, base: Path, work: Path, site_bytes: bytes | None) -> list[_Part]:
    parts: list[_Part] = []
    if spec.agent is not None:
        if spec.agent.wheel is not None:
            wheel = _resolve(base, spec.agent.wheel, "agent wheel")
        else:
            project = base / (spec.agent.project or ".")
            if not (project / "pyproject.toml").is_file():
                raise SpecError(f"agent project {project} has no pyproject.toml")
            wheel = build_project_wheel(project, work / "agent-wheel",
                                        spec.source_date_epoch)
        label = (None if spec.agent.project is None
                 else f"{spec.agent.project} (built as {wheel.name})")
        name, ver, lic = _wheel_info(wheel)
        parts.append(_Part("agent", normalize(name), ver,
                           [_Source(f"agent/{wheel.name}", wheel, label)],
                           licence=lic, purl=f"pkg:pypi/{normalize(name)}@{ver}"))
    if spec.wheelhouse is not None:
        parts.extend(_gather_wheelhouse(spec, base, spec.wheelhouse))
    if spec.router_wheelhouse is not None:
        parts.extend(_gather_wheelhouse(spec, base, spec.router_wheelhouse, router=True))
    for model in spec.model:
        root = base / model.dir
        if not root.is_dir():
            raise SpecError(f"model {model.name!r}: {root} is not a directory")
        files = []
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                raise SpecError(f"model {model.name!r}: {path} is a symbolic link; copy the "
                                "real file into the model directory")
            if path.is_file():
                rel = path.relative_to(root).as_posix()
                files.append(_Source(f"models/{model.name}/{rel}", path))
        if not files:
            raise SpecError(f"model {model.name!r}: {root} holds no files")
        parts.append(_Part("model", model.name, model.version, files, licence=model.licence,
                           source=model.source, root=root))
    if spec.image is not None:
        img = spec.image
        names = [("kernel", img.kernel), ("initrd", img.initrd), ("rootfs", img.rootfs),
                 ("packages", img.packages), ("manifest", img.manifest)]
        files = [_Source(f"image/{role}-{Path(rel).name}", _resolve(base, rel, f"image {role}"))
                 for role, rel in names if rel is not None]
        parts.append(_Part("image", "microvm-image", img.version, files))
        if img.packages is not None:
            parts.extend(_debian_packages(_resolve(base, img.packages, "image packages")))
    if spec.installer is not None:
        binary = _resolve(base, spec.installer.binary, "installer binary")
        parts.append(_Part("installer", "abhed-installer", spec.installer.version,
                           [_Source(f"installer/{binary.name}", binary)]))
    if spec.docs is not None:
        docs = [_resolve(base, rel, "doc") for rel in spec.docs.files]
        seen = [d.name for d in docs]
        if len(set(seen)) != len(seen):
            raise SpecError("two [docs] files share a file name")
        parts.append(_Part("docs", "docs", None, [_Source(f"docs/{d.name}", d) for d in docs]))
    if spec.site is not None and site_bytes is not None:
        parts.append(_site_part(spec, base, work, site_bytes))
    if not any(p.sources for p in parts):
        raise SpecError("the spec names no inputs: add [agent], [wheelhouse], [[model]], "
                        "[image], [installer] or [docs]")
    return parts


def _sign_models(parts: list[_Part], work: Path, key: SecretKey, kit: ModelKit) -> None:
    """Sign each model directory the OpenSSF Model Signing way (docs/bundle.md).

    ``models/<name>/model.sig`` and ``models/<name>/model-signing.pub`` join the
    model's members, so the installed directory verifies with the standard
    ``model_signing verify key`` command; the key is derived from the first
    signing key (``SecretKey.model_signing_key``), the signature deterministic,
    so the build stays reproducible.  The signature's one definition is models'
    (``kit``, see ``_model_kit``).
    """
    models = [p for p in parts if p.kind == "model"]
    signature, public = kit.signature_file, kit.public_key_file
    signing_key = key.model_signing_key()
    pem = kit.public_key_pem(signing_key)
    for part in models:
        prefix = f"models/{part.name}/"
        for source in part.sources:
            if source.member in (prefix + signature, prefix + public):
                raise SpecError(
                    f"model {part.name!r}: {source.path} is named like the signature the build "
                    f"writes ({source.member.removeprefix(prefix)}); move it out of the model "
                    "directory: the build signs the model itself")
        assert part.root is not None
        sig = work / f"model-{part.name}.sig"
        sig.write_bytes(kit.sign(part.root, name=part.name, key=signing_key))
        pub = work / f"model-{part.name}.pub"
        pub.write_bytes(pem)
        part.sources += [
            _Source(prefix + signature, sig,
                    label=f"[[model]] {part.name}: OpenSSF model signature (made by this build)"),
            _Source(prefix + public, pub,
                    label=f"[[model]] {part.name}: the model signature's public key"),
        ]


def _site_part(spec: BuildSpec, base: Path, work: Path, site_bytes: bytes) -> _Part:
    """The settings as their member's bytes (already expanded and checked) and the files
    the site ships beside them."""
    assert spec.site is not None
    data = work / "site-settings.json"
    data.write_bytes(site_bytes)
    sources = [_Source(SETTINGS_MEMBER, data, label="[site.settings] (expanded, canonical)")]
    seen: dict[str, str] = {}
    for rel in spec.site.files:
        path = _resolve(base, rel, "site file")
        if path.name in seen:
            raise SpecError(f"site files {seen[path.name]!r} and {rel!r} share the file name "
                            f"{path.name!r}; both would be {SITE_FILES}{path.name}: rename one")
        seen[path.name] = rel
        sources.append(_Source(SITE_FILES + path.name, path))
    return _Part("site", spec.site.name, None, sources)


def _site_settings(spec: BuildSpec, check: SettingsCheck | None) -> bytes | None:
    if spec.site is None:
        return None
    settings = spec.site.settings
    if spec.roles is not None and "agent" in spec.roles.hosts:
        # Engineers reach the model hosts' fronts through their host's relay: its provider
        # is the bundle's to write (bundle._roles), not the operator's.
        settings = with_relay_provider(settings, spec.roles.model_endpoints, "[site.settings]")
    return prepare_settings(settings, prefix=spec.site.prefix, version=spec.version,
                            check=check, where="[site.settings]")


def _gather_wheelhouse(spec: BuildSpec, base: Path, wheelhouse: WheelhouseSpec, *,
                       router: bool = False) -> list[_Part]:
    """The wheelhouse's wheels, each checked against its lock.  ``router``: vllm-router's
    own (``[router_wheelhouse]``), stored as ``router/<wheel>``, component kind ``router``:
    the model role's alone, installed into a venv of their own (installer._release)."""
    house = base / wheelhouse.dir
    lock = parse_lock(base / wheelhouse.lock)
    if not house.is_dir():
        raise SpecError(f"wheelhouse {house} is not a directory")
    parts: list[_Part] = []
    found: set[str] = set()
    try:
        plats = platform_tags(spec.platform.arch, spec.platform.glibc)
    except SpecError:  # not a manylinux glibc: no tag ranks, over-long names take their shortest
        plats = []
    for wheel in sorted(house.glob("*.whl")):
        name, ver, lic = _wheel_info(wheel)
        key = normalize(name)
        digest, wheel_size = digest_file(wheel)
        locked = lock.get(key)
        if locked is None:
            raise SpecError(f"{wheel.name} is in the wheelhouse but not in the lock file: "
                            "lock it or remove it")
        if locked[0] != ver or digest not in locked[1]:
            raise SpecError(f"{wheel.name} does not match the lock ({key}=={locked[0]} with "
                            f"its hashes); the wheelhouse holds a different file than was "
                            "locked: download it again")
        found.add(key)
        kind = "router" if router else "vllm" if key == "vllm" else "wheel"
        # pip download keeps every compressed tag (charset_normalizer's name is 101 bytes,
        # over ustar's 100): stored under the target's best tag alone, as gather stores it.
        stored = compact_filename(wheel.name, spec.platform.python, plats)
        folder = "router" if router else "wheels"
        parts.append(_Part(kind, key, ver, [_Source(f"{folder}/{stored}", wheel,
                                                    known=(digest, wheel_size))],
                           licence=lic, purl=f"pkg:pypi/{key}@{ver}"))
    missing = sorted(set(lock) - found)
    if missing:
        raise SpecError(f"the lock names wheels the wheelhouse lacks: {', '.join(missing)}")
    return parts


def _debian_packages(path: Path) -> list[_Part]:
    out = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        fields = line.split()
        if not fields or line.startswith("#"):
            continue
        if len(fields) != 3:
            raise SpecError(f"{path}: line {n} is not `name version arch`")
        name, ver, arch = fields
        out.append(_Part("deb", name, ver, [],
                         purl=f"pkg:deb/debian/{name}@{ver}?arch={arch}"))
    return out


def _zstd_threads() -> int:
    """Compression workers: at least 1 (the output is the same for any count >= 1)."""
    return min(usable_cpus(), 8)


class _Hasher:
    """SHA-256 in a thread of its own: hashlib releases the GIL on large updates, so the
    input's digest, the compressed stream's digest and zstd's workers use separate cores
    (hashing both streams costs more CPU than zstd -3 on mixed data)."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=8)  # at most 8 chunks queued
        self._thread = threading.Thread(target=self._run, name="bundle-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._q.get()) is not None:
            self._h.update(chunk)

    def update(self, chunk: bytes) -> None:
        self._q.put(chunk)

    def hexdigest(self) -> str:
        self.close()
        return self._h.hexdigest()

    def close(self) -> None:
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()


@dataclass
class _Packed:
    content_sha256: str
    content_size: int
    sha256: str
    size: int


def _compress(src: Path, dest: Path, level: int, tick: Callable[[int], None]) -> _Packed:
    """One read of ``src``: hash it, compress it to ``dest``, hash what is written."""
    import zstandard  # lazily: only building and unpacking need it

    cctx = zstandard.ZstdCompressor(level=level, write_content_size=True,
                                    threads=_zstd_threads())
    content, packed = _Hasher(), _Hasher()
    done = written = 0
    with contextlib.ExitStack() as stack:
        stack.callback(content.close)
        stack.callback(packed.close)
        fin = stack.enter_context(open(src, "rb"))
        fout = stack.enter_context(open(dest, "wb"))
        expected = os.fstat(fin.fileno()).st_size
        stream = cctx.compressobj(size=expected)
        try:
            while chunk := fin.read(CHUNK):
                content.update(chunk)
                done += len(chunk)
                out = stream.compress(chunk)
                if out:
                    packed.update(out)
                    fout.write(out)
                    written += len(out)
                tick(len(chunk))
            out = stream.flush()
        except zstandard.ZstdError:
            out = None
        if out is None or done != expected:
            raise SpecError(f"input {src} changed size while it was being compressed; build "
                            "again from a stable copy")
        packed.update(out)
        fout.write(out)
        written += len(out)
    return _Packed(content.hexdigest(), done, packed.hexdigest(), written)


def _prepare(spec: BuildSpec, source: _Source, work: Path, index: int,
             tick: Callable[[int], None]) -> _Prepared:
    mode = spec.compression
    if mode == "auto" and (source.path.name.lower().endswith(_INCOMPRESSIBLE)
                           or source.path.stat().st_size < _MIN_COMPRESS_BYTES):
        mode = "none"
    if mode != "none":
        packed = work / f"member-{index}.zst"
        result = _compress(source.path, packed, spec.zstd_level, tick)
        content_sha, content_size = result.content_sha256, result.content_size
        sha, size = result.sha256, result.size
        if spec.compression == "zstd" or size <= content_size * _KEEP_RATIO:
            member = Member(name=source.member + ".zst", size=size, sha256=sha,
                            compression="zstd", content_size=content_size,
                            content_sha256=content_sha)
            return _Prepared(member, packed, ours=True)
        packed.unlink()
    elif source.known is not None:  # hashed once already (the wheelhouse's lock check)
        content_sha, content_size = source.known
        tick(content_size)
    else:
        content_sha, content_size = digest_file(source.path, tick)
    member = Member(name=source.member, size=content_size, sha256=content_sha,
                    compression="none", content_size=content_size, content_sha256=content_sha)
    return _Prepared(member, source.path)


def _carried_weights(spec: BuildSpec, base: Path) -> dict[str, tuple[int, str]]:
    """sha256 -> (size, the bundle that carried it) for every model file of the bundles
    ``reuse_weights_from`` names.

    Only their heads are read, and their signatures are not checked: this is a hint of
    what the host already holds, not a trust decision.  The installer links a referenced
    file only from its own store and re-hashes it first, so a wrong hint can make an
    install refuse (by name), never install other bytes.
    """
    from ._regular import open_regular
    from ._verify import read_head

    carried: dict[str, tuple[int, str]] = {}
    for rel in spec.reuse_weights_from:
        path = base / rel if not Path(rel).is_absolute() else Path(rel)
        try:
            with open_regular(path, "earlier bundle") as f:
                raw, _ = read_head(TarReader(f, label=str(path)))
        except BundleError as exc:
            raise SpecError(f"reuse_weights_from: {path}: {exc}") from None
        earlier = parse_manifest(raw)
        label = f"{earlier.name} version {earlier.version}"
        for m in earlier.members:
            if m.name.startswith("models/"):
                carried.setdefault(m.content_sha256, (m.content_size, label))
        for r in earlier.references:
            carried.setdefault(r.content_sha256, (r.content_size, r.carried_by))
    return carried


def _rel(base: Path, path: Path) -> str:
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:
        return path.as_posix()


def build_bundle(spec_path: Path, out: Path, keys: Sequence[SecretKey], *,
                 progress: BuildProgress | None = None,
                 check_settings: SettingsCheck | None = None,
                 model_kit: ModelKit | None = None) -> Manifest:
    """Build the bundle ``spec_path`` describes into ``out``, signed by every key in ``keys``.

    ``check_settings`` checks the site's agent settings (``[site.settings]``) against the
    agent's schema; a spec that has settings is refused without one (``_settings``).
    ``model_kit`` signs each model directory (``models.bundle_kit.BUNDLE_KIT``); a spec with a
    model is refused without one (``_model_kit``).

    Raises:
        SpecError: the spec or one of its inputs is wrong (named).
        BundleError: writing failed; no partial ``out`` is left behind.
    """
    if not keys:
        raise SpecError("no signing key given: pass --key (make one with `abhed bundle keygen`)")
    spec = load_spec(spec_path)
    site_bytes = _site_settings(spec, check_settings)
    _check_roles(spec, site_bytes)
    kit = require_kit(model_kit, str(spec_path)) if spec.model else None
    base = spec_path.parent
    out_dir = out.parent if str(out.parent) else Path(".")
    if not out_dir.is_dir():
        raise SpecError(f"output directory {out_dir} does not exist")
    with tempfile.TemporaryDirectory(prefix=".abhed-build-", dir=out_dir) as tmp:
        work = Path(tmp)
        parts = _gather(spec, base, work, site_bytes)
        if kit is not None:
            _sign_models(parts, work, keys[0], kit)
        sources = [s for p in parts for s in p.sources]
        total = sum(s.path.stat().st_size for s in sources)
        done = 0

        def tick(step: str) -> Callable[[int], None]:
            def inner(n: int) -> None:
                nonlocal done
                done += n
                if progress is not None:
                    progress(step, done, total)
            return inner

        carried = _carried_weights(spec, base)
        # What an agent host needs of the model (its declaration, the files the settings
        # name) is carried, never referenced: an agent host keeps no model store.
        for_agents = _agent_model_files(spec, parts, site_bytes)
        # The signature and its key are always carried: a few KiB, and what verifies the rest.
        model_files = {s.member for p in parts if p.kind == "model" for s in p.sources
                       if s.path.parent != work}
        prepared: dict[str, _Prepared] = {}
        references: dict[str, Reference] = {}
        for i, source in enumerate(sources):
            if source.member in prepared or source.member in references:
                raise SpecError(f"two inputs would both be stored as {source.member!r}")
            if carried and source.member in model_files and source.member not in for_agents:
                sha, size = digest_file(source.path, tick("hash"))
                hit = carried.get(sha)
                if hit is not None and hit[0] == size:
                    references[source.member] = Reference(
                        name=source.member, content_size=size, content_sha256=sha,
                        carried_by=hit[1])
                    continue
                source.known = (sha, size)
            prepared[source.member] = _prepare(spec, source, work, i, tick("compress"))

        def stored_as(member: str) -> str:
            return prepared[member].member.name if member in prepared else member

        def content(member: str) -> tuple[str, int]:
            if member in references:
                return references[member].content_sha256, references[member].content_size
            m = prepared[member].member
            return m.content_sha256, m.content_size

        builder = _builder_name()
        sbom = render_sbom(spec.name, spec.version, builder, [
            SbomComponent(kind=p.kind, name=p.name, version=p.version, licence=p.licence,
                          source=p.source, purl=p.purl,
                          files=tuple(SbomFile(s.member, content(s.member)[0])
                                      for s in p.sources))
            for p in parts], spec.source_date_epoch)
        sbom_path = work / SBOM_NAME
        sbom_path.write_bytes(sbom)
        sbom_sha = hashlib.sha256(sbom).hexdigest()
        members = [Member(name=SBOM_NAME, size=len(sbom), sha256=sbom_sha, compression="none",
                          content_size=len(sbom), content_sha256=sbom_sha)]
        members += [prepared[s.member].member for s in sources if s.member in prepared]
        spec_sha = digest_file(spec_path).sha256
        if spec.site is not None and site_bytes is not None:
            # Every path the settings name inside the release's bundle/ must be carried.
            check_carried(json.loads(site_bytes), release_dir(spec.site.prefix, spec.version),
                          [s.member for s in sources])
        roles = _roles(spec, parts, site_bytes, stored_as, for_agents)
        manifest = Manifest(
            format=FORMAT, name=spec.name, version=spec.version, platform=spec.platform,
            roles=roles,
            members=tuple(members),
            references=tuple(references[s.member] for s in sources if s.member in references),
            components=tuple(Component(kind=p.kind, name=p.name, version=p.version,  # type: ignore[arg-type]
                                       licence=p.licence, source=p.source,
                                       members=tuple(stored_as(s.member) for s in p.sources))
                             for p in parts if p.kind != "deb"),
            sbom=SBOM_NAME,
            site=None if spec.site is None else SiteInfo(
                name=spec.site.name, prefix=spec.site.prefix, settings=SETTINGS_MEMBER),
            provenance=Provenance(
                builder=builder, source_date_epoch=spec.source_date_epoch, spec_sha256=spec_sha,
                inputs=tuple(Input(path=s.label or _rel(base, s.path), sha256=content(s.member)[0],
                                   size=content(s.member)[1])
                             for s in sources)))
        raw_manifest = manifest_json(manifest)
        signature = sign_set(raw_manifest, keys,
                             f"abhed-bundle {spec.name} version {spec.version}")
        stored = [(members[0], sbom_path, True)] + [
            (prepared[s.member].member, prepared[s.member].path, prepared[s.member].ours)
            for s in sources if s.member in prepared]
        done = 0
        total = sum(m.size for m, _, _ in stored)
        partial = work / "bundle.partial"
        try:
            _write(partial, raw_manifest, signature, stored, tick("write"))
            os.replace(partial, out)
        except OSError as exc:
            raise BundleError(f"writing {out} failed ({exc.strerror}); nothing was left "
                              "behind: free space and build again") from None
    return manifest


def _check_roles(spec: BuildSpec, site_bytes: bytes | None) -> None:
    """Refused before anything is read: an agent role with no settings, or settings whose
    provider points anywhere but the declared model endpoints."""
    if spec.roles is None or "agent" not in spec.roles.hosts:
        return
    if spec.site is None or site_bytes is None:
        raise SpecError("role 'agent' needs the site's settings ([site] in a build spec, "
                        "[agent] in a site spec): their provider is how engineers reach "
                        "the model hosts")
    check_provider_endpoints(json.loads(site_bytes), spec.roles.model_endpoints,
                             "[site.settings]")


def _agent_model_files(spec: BuildSpec, parts: list[_Part], site_bytes: bytes | None) -> set[str]:
    """The model files (as members, before any .zst) the agent role installs: each model's
    serving declaration (the agent host's gate reads its probe) and the files the site's
    settings name (the catalog)."""
    if spec.roles is None or "agent" not in spec.roles.hosts:
        return set()
    named: set[str] = set()
    if spec.site is not None and site_bytes is not None:
        root = release_dir(spec.site.prefix, spec.version) + "/bundle/"
        named = {p[len(root):] for p in release_paths(json.loads(site_bytes), root.rstrip("/"))
                 if p.startswith(root)}
    return {s.member for p in parts if p.kind == "model" for s in p.sources
            if s.member.rsplit("/", 1)[-1] == "abhed-serve.json" or s.member in named}


def _roles(spec: BuildSpec, parts: list[_Part], site_bytes: bytes | None,
           stored_as: Callable[[str], str], for_agents: set[str]) -> Roles | None:
    """Which members each role installs (``bundle._roles``): decided here, signed, so the
    installer only reads the lists."""
    if spec.roles is None:
        return None
    agent_wheel = next((s.path for p in parts if p.kind == "agent" for s in p.sources), None)
    wheels = {p.name: p.sources[0].path for p in parts if p.kind in ("wheel", "vllm")}
    closure = (agent_closure(agent_wheel, wheels, python=spec.platform.python,
                             arch=spec.platform.arch) if agent_wheel is not None else set())
    agent: list[str] = []
    model: list[str] = []
    for p in parts:
        for s in p.sources:
            name = stored_as(s.member)
            if p.kind not in ("image", "site"):
                model.append(name)
            if p.kind in ("agent", "image", "site", "installer", "docs") or (
                    p.kind == "wheel" and p.name in closure) or (
                    p.kind == "model" and s.member in for_agents):
                agent.append(name)
    template = None
    if spec.site is not None and site_bytes is not None:
        release = release_dir(spec.site.prefix, spec.version)
        template = hashlib.sha256(settings_bytes(unexpand(json.loads(site_bytes), release))) \
            .hexdigest()
    return Roles(hosts=spec.roles.hosts, agent=tuple(agent), model=tuple(model),
                 model_endpoints=spec.roles.model_endpoints, settings_template_sha256=template,
                 router=spec.roles.router)


def _write(partial: Path, raw_manifest: bytes, signature: bytes,
           stored: list[tuple[Member, Path, bool]], tick: Callable[[int], None]) -> None:
    with open(partial, "wb") as out:
        out.writelines(member_header(name, len(data)) + data + padding(len(data)) for name, data in ((MANIFEST_NAME, raw_manifest), (SIGNATURE_NAME, signature)))
        for member, path, ours in stored:
            out.write(member_header(member.name, member.size))
            if ours:
                _copy_ours(path, out, member, tick)
            else:
                _copy_hashed(path, out, member, tick)
            out.write(padding(member.size))
        out.write(end_of_archive())
        out.flush()
        os.fsync(out.fileno())
    os.chmod(partial, 0o644)


def _copy_hashed(path: Path, out: BinaryIO, member: Member, tick: Callable[[int], None]) -> None:
    """Copy an input, hashing it again: it is not ours and may have changed since pass one."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            out.write(chunk)
            tick(len(chunk))
    if size != member.size or h.hexdigest() != member.sha256:
        raise SpecError(f"input for {member.name!r} changed while the bundle was being "
                        "built; build again from a stable copy")


def _copy_ours(path: Path, out: BinaryIO, member: Member, tick: Callable[[int], None]) -> None:
    """Copy a work file this build wrote and hashed; the kernel moves the bytes."""
    out.flush()
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != member.size:
            raise SpecError(f"the work file for {member.name!r} was changed during the build; "
                            "build again")
        left = member.size
        offset = 0
        while left:
            try:
                n = os.copy_file_range(f.fileno(), out.fileno(), min(left, 1 << 30), offset)
            except OSError:
                n = 0  # another file system, or a kernel without it: copy by hand
            if n <= 0:
                f.seek(offset)
                while left and (chunk := f.read(min(CHUNK, left))):
                    out.write(chunk)
                    left -= len(chunk)
                    tick(len(chunk))
                break
            offset += n
            left -= n
            tick(n)
        out.seek(0, os.SEEK_END)  # the descriptor moved under the buffered writer
        if left:
            raise SpecError(f"the work file for {member.name!r} was cut short during the "
                            "build; build again")
