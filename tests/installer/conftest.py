"""Fixtures for the installer tests: the BUILT binary, real wheels, real signed bundles.

* ``installer_bin``: ``scripts/build-installer --cached`` (PyInstaller, cached outside the
  clone by a hash of installer/ and bundle/); ``ABHED_INSTALLER_BIN`` overrides it (a path,
  or e.g. "python -m installer" while developing).
* ``wheelhouse``: the agent's runtime dependencies as real wheels from PyPI (``pip
  download``), cached in ``$ABHED_CACHE/installer-wheels-<key>`` so only the first run on a
  machine touches the network; plus the agent's own wheel, built once per session.
* ``make_bundle``: a real signed bundle (``bundle.build_bundle``) holding those wheels, a tiny
  model directory and its ``abhed-serve.json``.  The model server it declares is the
  package's scripted OpenAI-compatible server (``python -m models.scripted``) started from
  the installed release as a real process on 127.0.0.1: real vLLM is too heavy for CI, and
  the gate code does not know the difference (only the declared command differs).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bundle import SecretKey, build_bundle, build_project_wheel
from cli.bundle import check_settings
from models.bundle_kit import BUNDLE_KIT
from tests.helpers import installer_argv

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ABHED_CACHE") or Path.home() / ".cache" / "abhed")
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="session")
def installer_bin() -> list[str]:
    return installer_argv()


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    key = hashlib.sha256(json.dumps([sorted(deps), PY, sys.platform]).encode()).hexdigest()[:16]
    cached = CACHE / f"installer-wheels-{key}"
    if not (cached / ".complete").is_file():
        tmp = CACHE / f"installer-wheels-{key}.partial.{os.getpid()}"
        tmp.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                        "--dest", str(tmp), *deps, "pip"], check=True, timeout=1200)
        (tmp / ".complete").write_text("")
        if cached.exists():
            shutil.rmtree(cached)
        tmp.rename(cached)
    return cached


@pytest.fixture(scope="session")
def agent_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's wheel, built as a bundle builds it (from a clean copy of the checkout:
    each xdist worker builds its own, and none shares the checkout's build/)."""
    return build_project_wheel(ROOT, tmp_path_factory.mktemp("agent-wheel"))


@dataclass(frozen=True)
class Keys:
    secret: SecretKey
    pub: Path
    other_secret: SecretKey
    other_pub: Path


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    d = tmp_path_factory.mktemp("keys")
    a, b = SecretKey.generate(), SecretKey.generate()
    (d / "release.pub").write_text(a.public_key().to_text())
    (d / "other.pub").write_text(b.public_key().to_text())
    return Keys(a, d / "release.pub", b, d / "other.pub")


PROBE_PROMPT = "Find the file whose name starts with PROBE- in the workspace and say its name."
# The installed agent's config for the probe: the gate's model server, by placeholders,
# and the model's catalog entry (in the bundle), which declares the capability probe's bar.
AGENT_CONFIG: dict[str, Any] = {
    "custom_providers": [{"name": "gate", "api": "openai", "base_url": "{base_url}",
                          "model": "{served_name}", "sampling": ["temperature", "seed"],
                          "catalog_entry": "tiny"}],
    "default_provider": "gate", "catalog": "{model_dir}/catalog.json",
    "sandbox": {"backend": "bwrap"}}
# The scripted reference model passes every family, so it declares the default bar.
SCRIPTED_BAR: dict[str, Any] = {"note": "the probe's scripted reference model (installer tests)"}


def catalog(bar: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"models": [{"name": "tiny", "served_name": "tiny", "weights_dir": ".",
                        "probe": SCRIPTED_BAR if bar is None else bar}]}


def scripted_command(behaviour: str = "good") -> list[str]:
    """The test bundles' model server: the probe's scripted model (gate-script.json for the rest)."""
    return ["{venv}/bin/python", "-m", "appliance.probe.scripted", "--behaviour", behaviour,
            "--script", "{model_dir}/gate-script.json", "--port", "{port}", "--model", "tiny"]
# The scripted model: the known answer, then a glob tool call, then a final answer.
GATE_SCRIPT: list[dict[str, Any]] = [
    {"text": "5"},
    {"tool_calls": [{"name": "glob", "arguments": {"pattern": "PROBE-*"}}]},
    {"text": "The probe file is the one glob found."}]


def descriptor(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "format": "abhed-serve/1",
        "served_name": "tiny",
        "command": scripted_command(),
        "known_answer": {"prompt": "What is 2+3? Answer with the number only.", "expect": "5"},
        "agent_probe": ["{venv}/bin/abhed", "run", "--json", "--max-turns", "4",
                        "--workspace", "{workspace}", PROBE_PROMPT],
        "agent_config": AGENT_CONFIG,
        "startup_timeout_s": 120,
        "agent_timeout_s": 120,
    }
    d.update(over)
    return d


BundleMaker = Callable[..., Path]

# The site's agent settings of the test bundles (docs/bundle.md, [agent]): the installer's
# model service, the release's catalog, a veto-only extension the site ships.
VETO_EXTENSION = ("import sys\n"
                  "for line in sys.stdin:  # no opinion on anything (docs/extensions.md)\n"
                  "    print('{}', flush=True)\n")


def site_settings(mode: str = "ask", *, deny: tuple[str, ...] = ("curl",),
                  max_turns: int | None = None) -> dict[str, Any]:
    return {**({"loop": {"max_turns": max_turns}} if max_turns is not None else {}),
        "default_provider": "site",
        "custom_providers": [{"name": "site", "api": "openai",
                              "base_url": "http://127.0.0.1:8000/v1", "model": "tiny",
                              "catalog_entry": "tiny"}],
        "catalog": "{release}/bundle/models/tiny/catalog.json",
        "extensions": [{"name": "veto", "command": "{release}/venv/bin/python",
                        "args": ["{release}/bundle/site/files/veto.py"]}],
        "sandbox": {"backend": "bwrap"},
        "policy": {"mode": mode, "deny": [{"tool": "bash", "program": p,
                                           "reason": "the site has no network"} for p in deny]},
        "events": {"redact": ["secret-[a-z0-9]+"]},
    }


@pytest.fixture(scope="session")
def make_bundle(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, agent_wheel: Path,
                keys: Keys) -> BundleMaker:
    made: dict[str, Path] = {}

    def make(version: int, *, weights: bytes = b"tiny weights v1\n" * 4096,
             serve: dict[str, Any] | None = None, script: list[dict[str, Any]] | None = None,
             platform: dict[str, Any] | None = None, drop_wheels: tuple[str, ...] = (),
             key: SecretKey | None = None, name: str = "abhed-test",
             with_descriptor: bool = True, model_from: Path | None = None,
             bar: dict[str, Any] | None = None, reuse_from: tuple[Path, ...] = (),
             site: dict[str, Any] | None = None, prefix: Path | None = None,
             roles: dict[str, Any] | None = None, extra_wheels: tuple[Path, ...] = (),
             image: bool = False) -> Path:
        spec_key = hashlib.sha256(repr((version, weights, serve, script, platform, drop_wheels,
                                        key.public_key().id_hex if key else None, name,
                                        with_descriptor, model_from, bar,
                                        reuse_from, site, prefix, roles, extra_wheels,
                                        image)).encode()).hexdigest()[:12]
        if spec_key in made:
            return made[spec_key]
        d = tmp_path_factory.mktemp(f"bundle-v{version}")
        model = d / "tiny"
        if model_from is not None:  # a real model directory (the real-vLLM test)
            shutil.copytree(model_from, model)
        else:
            model.mkdir()
            (model / "weights.bin").write_bytes(weights)
            (model / "config.json").write_text('{"layers": 1}\n')
        if with_descriptor:
            (model / "abhed-serve.json").write_text(json.dumps(serve or descriptor()))
            (model / "gate-script.json").write_text(json.dumps(GATE_SCRIPT if script is None else script))
            (model / "catalog.json").write_text(json.dumps(catalog(bar)))
        wh = d / "wheels"
        wh.mkdir()
        lock = []
        for w in sorted([*wheelhouse.glob("*.whl"), *extra_wheels]):
            if any(w.name.lower().startswith(p) for p in drop_wheels):
                continue
            os.link(w, wh / w.name)
            digest = hashlib.sha256(w.read_bytes()).hexdigest()
            n, v = w.name.split("-")[:2]
            lock.append(f"{n}=={v} --hash=sha256:{digest}")
        (d / "requirements.lock").write_text("\n".join(lock) + "\n")
        plat = {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": PY,
                "accelerator": "cpu"}
        plat.update(platform or {})
        spec = {"format": "abhed-bundle-spec/1", "name": name, "version": version,
                "source_date_epoch": 1700000000, "compression": "none", "platform": plat,
                "agent": {"wheel": str(agent_wheel)},
                "wheelhouse": {"dir": "wheels", "lock": "requirements.lock"},
                "model": [{"name": "tiny", "dir": "tiny", "licence": "Apache-2.0",
                           "source": "generated by the installer tests", "version": "1"}]}
        if reuse_from:
            spec["reuse_weights_from"] = [str(b) for b in reuse_from]
        if roles is not None:  # hosts by role (docs/bundle.md, Roles)
            spec["roles"] = roles
        if image:  # a stand-in microVM image: what a model host must not get
            for part, size in (("vmlinuz", 64 << 10), ("rootfs.ext4", 1 << 20)):
                (d / part).write_bytes(part.encode() * (size // len(part)))
            spec["image"] = {"kernel": "vmlinuz", "rootfs": "rootfs.ext4", "version": "test"}
        if site is not None:  # the site's agent settings (docs/bundle.md), for `prefix`
            assert prefix is not None, "settings are built for one prefix"
            (d / "veto.py").write_text(VETO_EXTENSION)
            spec["site"] = {"name": "plant-7", "prefix": str(prefix), "settings": site,
                            "files": [str(d / "veto.py")]}
        (d / "spec.json").write_text(json.dumps(spec))
        out = d / f"{name}-{version}.abhed"
        build_bundle(d / "spec.json", out, [key or keys.secret], check_settings=check_settings,
                     model_kit=BUNDLE_KIT)
        made[spec_key] = out
        return out

    return make


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class Installer:
    """Runs the built binary against one prefix, with a fake root for systemd and dpkg."""

    def __init__(self, argv: list[str], prefix: Path, sysroot: Path) -> None:
        self.argv = argv
        self.prefix = prefix
        self.sysroot = sysroot
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ABHED_INSTALLER")}
        self.env["ABHED_INSTALLER_SYSROOT"] = str(sysroot)

    def __call__(self, *args: str | Path, fault: str | None = None, timeout: float = 600,
                 prefix: bool = True, env: dict[str, str] | None = None) -> Result:
        e = dict(self.env, **(env or {}))
        if fault:
            e["ABHED_INSTALLER_FAULT"] = fault
        argv = self.argv + [str(a) for a in args]
        if prefix and args and args[0] not in ("--help", "--version"):
            argv += ["--prefix", str(self.prefix)]
        p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return Result(p.returncode, p.stdout, p.stderr)

    def popen(self, *args: str | Path, fault: str | None = None) -> subprocess.Popen[str]:
        e = dict(self.env)
        if fault:
            e["ABHED_INSTALLER_FAULT"] = fault
        return subprocess.Popen(self.argv + [str(a) for a in args] + ["--prefix", str(self.prefix)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                                stdin=subprocess.DEVNULL)

    def audit(self) -> list[dict[str, Any]]:
        path = self.prefix / "audit" / "audit.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def sysroot(tmp_path: Path) -> Path:
    root = tmp_path / "sysroot"
    (root / "etc").mkdir(parents=True)
    return root


@pytest.fixture
def inst(installer_bin: list[str], tmp_path: Path, sysroot: Path) -> Iterator[Installer]:
    yield Installer(installer_bin, tmp_path / "opt-abhed", sysroot)


def installed_host(installer_bin: list[str], where: Path, make_bundle: BundleMaker,
                   keys: Keys) -> Installer:
    """A fresh prefix under ``where`` with release 1 installed: the host a test module
    shares (test_failures, test_probe_gate)."""
    (where / "sysroot/etc").mkdir(parents=True)
    inst = Installer(installer_bin, where / "opt-abhed", where / "sysroot")
    r = inst("install", make_bundle(1), "--trust", keys.pub)
    assert r.returncode == 0, r.stdout + r.stderr
    return inst


def tree_snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` (links by target), to prove a failure changed nothing."""
    snap: dict[str, str] = {}
    if not root.exists():
        return snap
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                snap[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                snap[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.stat().st_size < (8 << 20) else str(p.stat().st_size)
            else:
                snap[rel] = "dir"
    return snap
