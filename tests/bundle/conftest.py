"""Real inputs for bundle tests: installable wheels, a lock, a model, an image, keys.

The wheels are made here with zipfile in the wheel format (METADATA, WHEEL,
RECORD with hashes), so pip installs them; no network, no build backend.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle import SecretKey, TrustPolicy
from bundle._manifest import canonical_json
from bundle._tar import end_of_archive, member_header, padding
from bundle._trust import sign_set
from models.bundle_kit import BUNDLE_KIT


def make_wheel(directory: Path, name: str, version: str, body: str = "VALUE = 1\n") -> Path:
    """A real, pip-installable pure-Python wheel with one module."""
    dist = f"{name}-{version}"
    files = {
        f"{name}/__init__.py": body.encode(),
        f"{dist}.dist-info/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: "
                                       f"{version}\nLicense: MIT\n").encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: abhed-tests\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    out = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return out


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def key() -> SecretKey:
    return SecretKey.generate()


@pytest.fixture(scope="session")
def trust(key: SecretKey) -> TrustPolicy:
    return TrustPolicy(keys=(key.public_key(),))


def write_inputs(root: Path, *, version: int = 2, model_bytes: int = 300_000) -> Path:
    """A full spec with every component kind; returns the spec path."""
    root.mkdir(parents=True, exist_ok=True)
    agent = root / "dist"
    agent.mkdir()
    make_wheel(agent, "abhedagent", "0.1.0")
    house = root / "wheelhouse"
    house.mkdir()
    lock = []
    for name, ver in (("alpha", "1.0"), ("beta", "2.3.1"), ("vllm", "0.0.1")):
        w = make_wheel(house, name, ver, body=f"NAME = {name!r}\n")
        lock.append(f"{name}=={ver} \\\n    --hash=sha256:{sha256_file(w)}")
    (root / "requirements.lock").write_text("# locked\n" + "\n".join(lock) + "\n")
    model = root / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"hidden_size": 8}))
    # Compressible weights (repetitive) so the member is stored as zstd.
    (model / "model.safetensors").write_bytes((b"\x00\x01\x02\x03" * 97)[:388] *
                                              (model_bytes // 388))
    (model / "tokenizer.json").write_text(json.dumps({"vocab": {"a": 0, "b": 1}}))
    image = root / "image"
    image.mkdir()
    (image / "vmlinuz").write_bytes(os.urandom(8192))
    (image / "initrd.img").write_bytes(b"initrd" * 2000)
    (image / "rootfs.img").write_bytes(b"\0" * 65536 + b"rootfs")
    (image / "packages.txt").write_text("bash 5.2.15-2+b2 amd64\ncoreutils 9.1-1 amd64\n")
    (root / "abhed-installer").write_bytes(b"\x7fELF" + os.urandom(5000))
    (root / "guide.md").write_text("# Operator guide\n" * 50)
    spec = root / "spec.toml"
    spec.write_text(f"""
format = "abhed-bundle-spec/1"
name = "abhed"
version = {version}
source_date_epoch = 1700000000

[platform]
os = "linux"
arch = "x86_64"
glibc = "2.36"
python = "3.11"
accelerator = "nvidia"
nvidia_driver_min = "535"
cuda = "12.2"

[agent]
wheel = "dist/abhedagent-0.1.0-py3-none-any.whl"

[wheelhouse]
dir = "wheelhouse"
lock = "requirements.lock"

[[model]]
name = "tiny"
dir = "models/tiny"
licence = "Apache-2.0"
source = "made by the test suite"
version = "1"

[image]
kernel = "image/vmlinuz"
initrd = "image/initrd.img"
rootfs = "image/rootfs.img"
packages = "image/packages.txt"
version = "2026.1"

[installer]
binary = "abhed-installer"
version = "0.1.0"

[docs]
files = ["guide.md"]
""")
    return spec


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, key: SecretKey) -> Path:
    """One full bundle, built once; tests copy it before changing it."""
    from bundle import build_bundle

    root = tmp_path_factory.mktemp("built")
    spec = write_inputs(root / "in")
    out = root / "full.abhed"
    build_bundle(spec, out, [key], model_kit=BUNDLE_KIT)
    return out


@pytest.fixture
def copy_of(tmp_path: Path, built: Path) -> Callable[[], Path]:
    def make() -> Path:
        dest = tmp_path / f"copy-{len(list(tmp_path.glob('copy-*')))}.abhed"
        dest.write_bytes(built.read_bytes())
        return dest
    return make


def forge(path: Path, manifest: dict[str, object] | bytes, members: list[tuple[str, bytes]],
          keys: list[SecretKey], *, signature: bytes | None = None,
          head: list[tuple[str, bytes]] | None = None) -> Path:
    """Write a bundle from raw parts, signing the manifest bytes as given (for hostile cases)."""
    raw = manifest if isinstance(manifest, bytes) else canonical_json(manifest)
    if head is None:
        sig = signature if signature is not None else sign_set(raw, keys, "forged for a test")
        head = [("manifest.json", raw), ("manifest.json.minisig", sig)]
    parts = head
    with open(path, "wb") as f:
        f.writelines(member_header(name, len(data)) + data + padding(len(data)) for name, data in parts + members)
        f.write(end_of_archive())
    return path


def manifest_for(members: list[tuple[str, bytes]], *, version: int = 1,
                 name: str = "forged") -> dict[str, object]:
    """A valid manifest dict for uncompressed members (the first one is the SBOM)."""
    ms = [{"name": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest(),
           "compression": "none", "content_size": len(d),
           "content_sha256": hashlib.sha256(d).hexdigest()} for n, d in members]
    return {
        "format": "abhed-bundle/1", "name": name, "version": version,
        "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                     "accelerator": "cpu", "nvidia_driver_min": None, "cuda": None},
        "members": ms,
        "components": [{"kind": "docs", "name": "docs", "version": None, "licence": None,
                        "source": None, "members": [n for n, _ in members[1:]]}],
        "sbom": members[0][0],
        "provenance": {"builder": "tests", "source_date_epoch": None, "spec_sha256": "0" * 64,
                       "inputs": []},
    }
