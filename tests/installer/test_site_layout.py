"""The site layer as install_site lays it out, in-process on a real signed bundle (no venv
build): the microVM image where ``sandbox.image_dir`` reads it, every path the settings
name checked before anything is switched, and the directories on the way made 0755.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bundle import SecretKey, TrustPolicy, build_bundle, verify_bundle
from cli.bundle import check_settings
from installer._errors import StepFailed
from installer._layout import Layout
from installer._site_install import install_site
from models.bundle_kit import BUNDLE_KIT


def _release(tmp_path: Path, settings: dict[str, Any], *, manifest_role: bool = True) -> tuple[
        Layout, Path, Any]:
    src = tmp_path / "src"
    (src / "image").mkdir(parents=True)
    for name in ("vmlinuz", "initrd.img", "rootfs.ext4"):
        (src / "image" / name).write_bytes(name.encode() * 100)
    (src / "image/manifest.json").write_text('{"format": "test", "key": "k"}\n')
    (src / "tiny").mkdir()
    (src / "tiny/weights.bin").write_bytes(b"w" * 100)
    prefix = tmp_path / "opt-abhed"
    image = {"kernel": "image/vmlinuz", "initrd": "image/initrd.img",
             "rootfs": "image/rootfs.ext4"}
    if manifest_role:
        image["manifest"] = "image/manifest.json"
    spec = {"format": "abhed-bundle-spec/1", "name": "plant", "version": 4,
            "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                         "accelerator": "cpu"},
            "model": [{"name": "tiny", "dir": "tiny", "licence": "MIT", "source": "test"}],
            "image": image,
            "site": {"name": "plant-7", "prefix": str(prefix), "settings": settings}}
    (src / "spec.json").write_text(json.dumps(spec))
    key = SecretKey.generate()
    build_bundle(src / "spec.json", tmp_path / "b.abhed", [key], check_settings=check_settings,
                 model_kit=BUNDLE_KIT)
    layout = Layout(prefix)
    release = layout.release(4)
    layout.releases.mkdir(parents=True)
    os.chmod(layout.releases, 0o775)  # as a umask of 002 would leave it
    release.mkdir()
    vb = verify_bundle(tmp_path / "b.abhed", TrustPolicy(keys=(key.public_key(),)),
                       stage_to=release / "bundle")
    (release / "venv/bin").mkdir(parents=True)
    (release / "venv/bin/python").write_text("")
    return layout, release, vb.manifest


def test_the_image_is_laid_out_where_the_sandbox_reads_it(tmp_path: Path) -> None:
    layout, release, manifest = _release(tmp_path, {"sandbox": {"image_dir": "{release}/image"}})
    digest = install_site(release, layout, manifest, ("abc",), "0" * 64)
    image = release / "image"
    assert sorted(os.listdir(image)) == ["initrd.img", "manifest.json", "rootfs.ext4", "vmlinuz"]
    assert os.readlink(image / "vmlinuz") == "../bundle/image/kernel-vmlinuz"
    assert (image / "rootfs.ext4").read_bytes() == b"rootfs.ext4" * 100
    assert json.loads((image / "manifest.json").read_text())["key"] == "k"
    settings = json.loads((release / "site/settings.json").read_text())
    assert settings["sandbox"]["image_dir"] == str(image)
    assert digest is not None and json.loads((release / "site/origin.json").read_text())[
        "settings_sha256"] == digest
    # no directory on the way to the settings is writable by group or others
    for d in (layout.prefix, layout.releases, release, release / "site"):
        assert d.stat().st_mode & 0o022 == 0, d


def test_an_image_without_its_manifest_is_not_laid_out_and_the_settings_say_so(
        tmp_path: Path) -> None:
    layout, release, manifest = _release(tmp_path, {"sandbox": {"image_dir": "{release}/image"}},
                                         manifest_role=False)
    with pytest.raises(StepFailed, match=rf"name 1 path\(s\) this release does not have: "
                                         rf"{release}/image\."):
        install_site(release, layout, manifest, ("abc",), "0" * 64)


@pytest.mark.parametrize("settings", [
    {"mcp_servers": [{"name": "git", "command": "{release}/venv/bin/mcp-server-git"}]},
    {"extensions": [{"name": "x", "command": "{release}/venv/bin/python",
                     "args": ["{release}/venv/lib/missing.py"]}]},
])
def test_a_path_the_release_does_not_have_is_refused_before_the_switch(
        tmp_path: Path, settings: dict[str, Any]) -> None:
    layout, release, manifest = _release(tmp_path, settings)
    with pytest.raises(StepFailed, match="does not have: .*venv/.*nothing was switched"):
        install_site(release, layout, manifest, ("abc",), "0" * 64)
