"""The microVM image: recipes, the initramfs, the manifest of the built test
image, and the VM's own lifecycle (crash and recovery, jobs dying with it)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.sandbox import MicroVM, SandboxCrashed, SandboxSettings
from bundle.image import ImageError, build_image, default_agent_source, image_key, load_recipe
from bundle.image._initramfs import MODULES, build_initramfs, module_order
from tools import ToolContext, Workspace, run_tool
from tools.bash import Bash

SETTINGS = SandboxSettings(memory_mib=512, vcpus=1, kill_grace_s=1.0, boot_timeout_s=300)


def _release() -> str:
    return json.loads((built_image() / "manifest.json").read_text())["kernel"]["release"]


_BUILT: list[Path] = []


def built_image() -> Path:
    if not _BUILT:
        _BUILT.append(build_image("test", agent_source=default_agent_source()))
    return _BUILT[0]


# -- recipes ------------------------------------------------------------------------

@pytest.mark.parametrize("body, expect", [
    (b"{not json", "line 1, column 2: not valid JSON"),
    (b'{"name": "x", "packages": ["python3"], "network": true}', "network: unknown key"),
    (b'{"name": "x", "packages": ["python3; rm -rf /"]}', "not a Debian package name"),
    (b'{"name": "../etc", "packages": []}', "name: String should match pattern"),
    (b'{"name": "x", "pins": {"--force-yes": "1"}}', "not a Debian package name"),
    (b'[]', "must be a JSON object"),
    (b'{"name": "x", "slim": "yes"}', "slim: Input should be a valid boolean"),
])
def test_bad_recipes_are_refused(tmp_path: Path, body: bytes, expect: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(body)
    with pytest.raises(ImageError, match=expect):
        load_recipe(str(path))


def test_an_unknown_recipe_names_the_shipped_ones() -> None:
    with pytest.raises(ImageError, match="shipped recipes: default, test"):
        load_recipe("no-such-recipe")


def test_image_errors_join_the_bundle_error_root() -> None:
    """Issue 11: `except BundleError` (every `abhed bundle` verb) must catch image errors too."""
    from bundle import BundleError

    with pytest.raises(BundleError):
        load_recipe("no-such-recipe")


def test_shipped_recipes_load() -> None:
    for name in ("test", "default"):
        recipe, raw = load_recipe(name)
        assert recipe.name == name and raw


def test_the_image_key_covers_the_agent() -> None:
    _, raw = load_recipe("test")
    agent = default_agent_source().read_bytes()
    assert image_key(raw, agent) == image_key(raw, agent)
    assert image_key(raw, agent) != image_key(raw, agent + b"\n# changed")
    assert image_key(raw, agent) != image_key(raw + b" ", agent)


# -- initramfs ------------------------------------------------------------------------

def _cpio_names(data: bytes) -> list[str]:
    names, pos = [], 0
    while True:
        assert data[pos:pos + 6] == b"070701"
        size = int(data[pos + 54:pos + 62], 16)
        namesize = int(data[pos + 94:pos + 102], 16)
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += -pos % 4
        pos += size + (-size % 4)
        if name == "TRAILER!!!":
            return names
        names.append(name)


@pytest.mark.slow
def test_initramfs_holds_init_busybox_and_modules_in_dependency_order(tmp_path: Path) -> None:
    modules_dir = Path("/lib/modules") / _release()
    dest = tmp_path / "initrd.img"
    loaded = build_initramfs(Path("/bin/busybox"), b"#!/bin/sh\n", modules_dir, dest)
    names = _cpio_names(gzip.decompress(dest.read_bytes()))
    assert {"init", "bin/busybox", "modules/order"} <= set(names)
    assert loaded.index("virtio.ko") < loaded.index("virtio_pci.ko")
    assert loaded.index("fuse.ko") < loaded.index("virtiofs.ko")
    assert {f"{m}.ko" for m in MODULES} <= set(loaded)
    again = tmp_path / "again.img"
    build_initramfs(Path("/bin/busybox"), b"#!/bin/sh\n", modules_dir, again)
    assert again.read_bytes() == dest.read_bytes()  # reproducible


def test_initramfs_problems_say_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="busybox-static"):
        build_initramfs(tmp_path / "no-busybox", b"", tmp_path, tmp_path / "x")
    with pytest.raises(ImageError, match="kernel package"):
        module_order(tmp_path)


# -- the built image --------------------------------------------------------------------

@pytest.mark.slow
def test_manifest_hashes_match_the_image_files() -> None:
    image = built_image()
    manifest = json.loads((image / "manifest.json").read_text())
    for name, info in manifest["files"].items():
        digest = hashlib.sha256((image / name).read_bytes()).hexdigest()
        assert digest == info["sha256"], name
    agent_sha = hashlib.sha256(default_agent_source().read_bytes()).hexdigest()
    assert manifest["agent_sha256"] == agent_sha
    files = {row[0]: row for row in manifest["rootfs_files"]}
    assert files["/opt/abhed/agent.py"][2] == agent_sha
    assert "/usr/bin/bash" in files or "/bin/bash" in files
    assert manifest["packages"]["python3-minimal"]
    assert build_image("test", agent_source=default_agent_source()) == image  # cached


# -- the VM's lifecycle ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MicroVM]:
    ws = str(tmp_path_factory.mktemp("vm-life").resolve())
    machine = MicroVM(ws, built_image(), SETTINGS)
    yield machine
    machine.close()


@pytest.mark.slow
def test_a_crashed_vm_is_reported_then_replaced(vm: MicroVM) -> None:
    ctx = ToolContext(workspace=Workspace(vm.workspace), sandbox=vm)
    bash = Bash()
    first = run_tool(bash, {"command": "uname -r", "description": "kernel"}, ctx)
    assert first.ok and vm.accel in ("kvm", "tcg")
    assert vm.accel == "tcg" or os.access("/dev/kvm", os.W_OK)
    guest = vm._guest
    assert guest is not None and guest.qemu is not None
    guest.qemu.kill()
    guest.qemu.wait()
    with pytest.raises(SandboxCrashed, match="stopped"):
        vm.run("true", cwd=vm.workspace, env={}, timeout_s=10)
    crashed = run_tool(bash, {"command": "true", "description": "after crash"}, ctx)
    assert crashed.ok  # the next call boots a new VM
    assert vm._guest is not guest


@pytest.mark.slow
def test_closing_the_session_stops_the_vm_and_its_jobs(vm: MicroVM) -> None:
    job = vm.start("sleep 1000", cwd=vm.workspace, env={})
    assert vm.job(job).state == "running"
    guest = vm._guest
    assert guest is not None and guest.qemu is not None and guest.vfsd is not None
    vm.close()
    assert guest.qemu.poll() is not None and guest.vfsd.poll() is not None
    assert not os.path.exists(guest.dir)
    with pytest.raises(KeyError):
        vm.job(job)
