"""Build a microVM image from a recipe: kernel, initramfs, read-only ext4 root, manifest.

Steps (each one a plain Debian tool, so an auditor can redo them by hand):

1. ``debootstrap --variant=minbase --include=PACKAGES SUITE root MIRROR``;
   pinned versions are checked against what was installed (a mismatch fails
   the build instead of shipping something else);
2. the guest agent goes to ``/opt/abhed/agent.py``; docs, man pages, locales
   and apt lists are dropped when the recipe says ``slim``;
3. ``mkfs.ext4 -d root`` makes the root image with a fixed UUID, hash seed and
   timestamps (``E2FSPROGS_FAKE_TIME``), no journal (it is mounted read-only);
4. the kernel (``/boot/vmlinuz-VERSION`` of the recipe's kernel package) is
   copied, and an initramfs is written with busybox, the virtio modules and
   ``init.sh``;
5. ``manifest.json`` records the recipe, resolved package versions, the hash
   of every file in the root and of every image file.

The result lands in ``CACHE/<key>/`` where the key hashes every input, and is
moved there only when complete, so a half-built image is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import uuid
from pathlib import Path
from typing import Any

from bundle.image._errors import ImageError
from bundle.image._initramfs import build_initramfs
from bundle.image._recipe import BUILD_FORMAT, Recipe, input_key, load_recipe
from foundation import digest_file, parse_document, read_regular

__all__ = ["IMAGE_FILES", "build_image", "default_agent_source", "default_cache_dir", "image_key"]

IMAGE_FILES = ("vmlinuz", "initrd.img", "rootfs.ext4", "manifest.json")
_HERE = Path(__file__).resolve().parent
_INIT = _HERE / "init.sh"
_EPOCH = 1700000000  # fixed timestamp for every file the builder writes
_SLIM_DIRS = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
              "var/lib/apt/lists", "var/cache/apt", "var/cache/debconf", "var/log")


def default_cache_dir() -> Path:
    """``$ABHED_IMAGE_CACHE`` or ``~/.cache/abhed/images`` (outside any clone)."""
    env = os.environ.get("ABHED_IMAGE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "abhed" / "images"


def default_agent_source() -> Path:
    """The guest agent's file, ``foundation.guest`` (found by its name, not run here).

    Named by module so that tests/test_boundaries.py sees the dependency (bundle ->
    foundation), as it sees an import.
    """
    import importlib.util

    spec = importlib.util.find_spec("foundation.guest")
    if spec is None or spec.origin is None:
        raise ImageError("the foundation package is not installed; pip install abhed")
    agent = Path(spec.origin)
    if not agent.is_file():
        raise ImageError(f"{agent} is missing; reinstall abhed")
    return agent


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> str:
    if os.geteuid() != 0 and argv[0] in ("debootstrap", "chroot"):
        argv = ["sudo", "-n", *argv]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    except FileNotFoundError:
        raise ImageError(f"{argv[0]} is not installed; it is needed to {what} (scripts/setup "
                         "installs it from scripts/apt-packages.txt)") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-2000:]
        raise ImageError(f"{what} failed ({' '.join(argv[:3])}... exit {proc.returncode}):\n{tail}")
    return proc.stdout


def _kernel(recipe: Recipe) -> tuple[str, str]:
    """(kernel release, Debian version) of the recipe's installed kernel package."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}\t${Version}", recipe.kernel_package],
                             capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ImageError("dpkg-query is missing: the image builder needs a Debian host") from None
    if out.returncode != 0:
        raise ImageError(f"kernel package {recipe.kernel_package} is not installed; "
                         f"apt-get install {recipe.kernel_package}")
    depends, version = out.stdout.split("\t", 1)
    release = ""
    for dep in depends.split(","):
        name = dep.strip().split(" ")[0]
        if name.startswith("linux-image-"):
            release = name.removeprefix("linux-image-")
    if not release and recipe.kernel_package.startswith("linux-image-"):
        release = recipe.kernel_package.removeprefix("linux-image-")
    if not (Path("/boot") / f"vmlinuz-{release}").exists():
        raise ImageError(f"/boot/vmlinuz-{release} is missing; reinstall {recipe.kernel_package}")
    return release, version


def image_key(recipe_bytes: bytes, agent_source: bytes) -> str:
    return input_key(recipe_bytes, agent_source, _INIT.read_bytes(),
                     (_HERE / "_initramfs.py").read_bytes(), (_HERE / "_build.py").read_bytes())


def _file_list(root: Path) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = Path(dirpath) / name
            st = p.lstat()
            rel = "/" + str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                rows.append([rel, "link", os.readlink(p)])
            elif stat.S_ISREG(st.st_mode):
                rows.append([rel, f"{stat.S_IMODE(st.st_mode):o}", digest_file(p).sha256])
    return rows


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except OSError:
                pass
    return total


def _publish(tmp: Path, final: Path, marker: str) -> None:
    """Rename a finished build into place; if another build got there first, keep theirs."""
    if final.exists() and not (final / marker).is_file():
        shutil.rmtree(final, ignore_errors=True)  # a leftover without its marker: incomplete
    try:
        os.rename(tmp, final)
    except OSError:
        if not (final / marker).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def _prune(cache: Path, name: str, *, keep: Path, count: int = 3) -> None:
    """Drop all but the newest ``count`` images of a recipe (each is ~200 MB)."""
    images = sorted((p for p in cache.glob(f"{name}-*") if p.is_dir() and p != keep
                     and not p.name.startswith("base-")),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in images[count - 1:]:
        shutil.rmtree(old, ignore_errors=True)


def _base_root(recipe: Recipe, raw: bytes, cache: Path, say: Any) -> Path:
    """The debootstrapped (and slimmed) root for a recipe, cached by the recipe alone.

    This is the slow step (minutes); keeping it apart means a new guest agent
    or init only redoes the fast steps.
    """
    base = cache / f"base-{recipe.name}-{input_key(raw)}"
    if (base / "packages.json").is_file():
        return base
    tmp = cache / f".{base.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        root = tmp / "root"
        say(f"debootstrap {recipe.suite} ({', '.join(recipe.packages) or 'minbase only'})")
        debs = cache.parent / "debootstrap-cache"
        debs.mkdir(parents=True, exist_ok=True)
        argv = ["debootstrap", "--variant=minbase", f"--cache-dir={debs}"]
        wanted = sorted(set(recipe.packages) | set(recipe.pins))
        if wanted:
            argv.append("--include=" + ",".join(wanted))
        _run([*argv, recipe.suite, str(root), recipe.mirror], "debootstrap the root")
        versions = dict(
            line.split("\t", 1)
            for line in _run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W",
                              "-f=${Package}\t${Version}\n"], "list the root's packages").splitlines()
            if "\t" in line
        )
        wrong = {p: (v, versions.get(p)) for p, v in recipe.pins.items() if versions.get(p) != v}
        if wrong:
            detail = "; ".join(f"{p}: pinned {v}, got {got}" for p, (v, got) in wrong.items())
            raise ImageError(f"recipe {recipe.name}: pinned versions not found on {recipe.mirror} "
                             f"({detail}); point mirror at a snapshot.debian.org date that has them "
                             "or update the pins")
        if recipe.slim:
            for rel in _SLIM_DIRS:
                d = root / rel
                if d.is_dir():
                    for child in d.iterdir():
                        if child.is_dir() and not child.is_symlink():
                            shutil.rmtree(child)
                        else:
                            child.unlink()
        (tmp / "packages.json").write_text(json.dumps(versions, indent=1, sort_keys=True) + "\n")
        _publish(tmp, base, "packages.json")
        return base
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_image(recipe_name: str, *, agent_source: Path, cache_dir: Path | None = None,
                log: Any = None) -> Path:
    """Build (or find already built) the image for a recipe; return its directory."""
    recipe, raw = load_recipe(recipe_name)
    agent = agent_source.read_bytes()
    key = image_key(raw, agent)
    cache = cache_dir or default_cache_dir()
    out = cache / f"{recipe.name}-{key}"
    if (out / "manifest.json").is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{recipe.name}-{key}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()

    def say(msg: str) -> None:
        if log is not None:
            log(msg)

    try:
        release, kernel_version = _kernel(recipe)
        base = _base_root(recipe, raw, cache, say)
        versions = parse_document(read_regular(base / "packages.json", 1 << 20, "base packages"),
                                  what="base packages", source=base / "packages.json")
        root = tmp / "root"
        say("copy the base root")
        _run(["cp", "-a", "--reflink=auto", str(base / "root"), str(root)], "copy the base root")
        (root / "opt/abhed").mkdir(parents=True, exist_ok=True)
        (root / "opt/abhed/agent.py").write_bytes(agent)
        (root / "etc/hostname").write_text("abhed-vm\n")
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                os.utime(os.path.join(dirpath, name), (_EPOCH, _EPOCH), follow_symlinks=False)

        say("mkfs.ext4 the read-only root")
        size_mib = int(_tree_bytes(root) * 1.25 / (1 << 20)) + 64
        uid = str(uuid.UUID(key[:32].ljust(32, "0")))
        env = dict(os.environ, E2FSPROGS_FAKE_TIME=str(_EPOCH))
        _run(["mkfs.ext4", "-q", "-F", "-L", "abhed-root", "-U", uid, "-m", "0",
              "-O", "^has_journal", "-E", f"root_owner=0:0,hash_seed={uid}", "-d", str(root),
              str(tmp / "rootfs.ext4"), f"{size_mib}M"], "make the ext4 root", env=env)

        say(f"kernel {release} and initramfs")
        shutil.copyfile(f"/boot/vmlinuz-{release}", tmp / "vmlinuz")
        modules = build_initramfs(Path("/bin/busybox"), _INIT.read_bytes(),
                                  Path("/lib/modules") / release, tmp / "initrd.img")
        manifest = {
            "format": BUILD_FORMAT,
            "key": key,
            "recipe": recipe.model_dump(mode="json"),
            "kernel": {"package": recipe.kernel_package, "version": kernel_version,
                       "release": release, "modules": modules},
            "agent_sha256": hashlib.sha256(agent).hexdigest(),
            "packages": dict(sorted(versions.items())),
            "files": {name: {"sha256": digest_file(tmp / name).sha256, "bytes": (tmp / name).stat().st_size}
                      for name in ("vmlinuz", "initrd.img", "rootfs.ext4")},
            "rootfs_files": _file_list(root),
        }
        shutil.rmtree(root)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        _publish(tmp, out, "manifest.json")
        _prune(cache, recipe.name, keep=out)
        return out
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
