"""The initramfs: busybox, the virtio modules the kernel lacks, and our /init.

Written as a ``newc`` cpio archive by hand (no cpio binary needed) with fixed
timestamps and owners, gzip'd with mtime 0, so the same inputs give the same
bytes.
"""

from __future__ import annotations

import gzip
import io
import stat
from pathlib import Path

from bundle.image._errors import ImageError

__all__ = ["MODULES", "build_initramfs", "module_order"]

# What the guest needs and the Debian cloud kernel builds as modules:
# PCI and MMIO transports (q35 / microvm), the root disk, the agent's serial
# port, the workspace share and the writable overlay.
MODULES = ("virtio_pci", "virtio_mmio", "virtio_blk", "virtio_console", "virtiofs", "overlay")


def module_order(modules_dir: Path, wanted: tuple[str, ...] = MODULES) -> list[str]:
    """Module files (relative to ``modules_dir``) in an order insmod accepts."""
    try:
        dep_text = (modules_dir / "modules.dep").read_text()
    except OSError as exc:
        raise ImageError(f"cannot read {modules_dir}/modules.dep ({exc.strerror}); install the "
                         "kernel package named in the recipe") from None
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in dep_text.splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
        by_name[Path(mod).name.split(".ko")[0].replace("-", "_")] = mod
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order:
            return
        for dep in reversed(deps.get(mod, [])):
            visit(dep)
        order.append(mod)

    for name in wanted:
        found = by_name.get(name)
        if found is None:
            continue  # built into this kernel
        visit(found)
    return order


class _Cpio:
    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.ino = 1

    def add(self, name: str, mode: int, data: bytes = b"") -> None:
        nameb = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nameb), 0]
        self.ino += 1
        self.out.write(b"070701" + b"".join(b"%08X" % f for f in fields))
        self.out.write(nameb)
        self.out.write(b"\0" * (-(110 + len(nameb)) % 4))
        self.out.write(data)
        self.out.write(b"\0" * (-len(data) % 4))

    def finish(self) -> bytes:
        self.add("TRAILER!!!", 0)
        return self.out.getvalue()


def build_initramfs(busybox: Path, init_script: bytes, modules_dir: Path, dest: Path) -> list[str]:
    """Write the gzip'd cpio to ``dest``; return the module files it holds."""
    if not busybox.is_file():
        raise ImageError(f"{busybox} is missing; install busybox-static (a statically linked busybox)")
    order = module_order(modules_dir)
    cpio = _Cpio()
    for d in ("bin", "dev", "proc", "sys", "modules", "lower", "upper", "newroot", "tmp"):
        cpio.add(d, stat.S_IFDIR | 0o755)
    cpio.add("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes())
    cpio.add("bin/sh", stat.S_IFLNK | 0o777, b"busybox")
    cpio.add("init", stat.S_IFREG | 0o755, init_script)
    names = []
    for mod in order:
        name = Path(mod).name
        data = (modules_dir / mod).read_bytes()
        if name.endswith((".xz", ".zst", ".gz")):
            raise ImageError(f"{mod} is compressed; this builder expects plain .ko modules")
        cpio.add(f"modules/{name}", stat.S_IFREG | 0o644, data)
        names.append(name)
    cpio.add("modules/order", stat.S_IFREG | 0o644, ("\n".join(names) + "\n").encode())
    with open(dest, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0,
                                                   compresslevel=6) as gz:
        gz.write(cpio.finish())
    return names
