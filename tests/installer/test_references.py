"""An upgrade bundle that references its weights instead of carrying them, with the built
binary: refused where the host lacks them, linked from the store where it has them, and
refused again when the kept copy was altered."""

from __future__ import annotations

import json
import os

import pytest

from bundle import TrustPolicy, inspect_bundle

from .conftest import BundleMaker, Installer, Keys, tree_snapshot

pytestmark = pytest.mark.slow


def test_weights_referenced_by_an_upgrade_come_from_the_store(
        inst: Installer, make_bundle: BundleMaker, keys: Keys) -> None:
    full = make_bundle(1)
    thin = make_bundle(2, reuse_from=(full,))
    m = inspect_bundle(thin, TrustPolicy(keys=(keys.secret.public_key(),))).manifest
    referenced = {r.name for r in m.references}
    assert "models/tiny/weights.bin" in referenced
    assert "models/tiny/abhed-serve.json" in referenced  # the gate reads a referenced file
    assert thin.stat().st_size < full.stat().st_size

    # A host that never installed the carrier: refused before anything is written.
    r = inst("preflight", thin, "--trust", keys.pub)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "kept_weights" in r.stdout and "install abhed-test version 1" in r.stdout
    r = inst("install", thin, "--trust", keys.pub)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "kept_weights" in r.stderr and "abhed-test version 1" in r.stderr
    assert not (inst.prefix / "releases").exists()

    assert inst("install", full, "--trust", keys.pub).returncode == 0
    r = inst("preflight", thin)
    assert r.returncode == 0 and "kept_weights" in r.stdout, r.stdout + r.stderr
    r = inst("upgrade", thin)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gate: agent tool call: ok" in r.stderr
    assert f"{len(referenced)} of them not carried by the bundle" in r.stderr
    w1 = inst.prefix / "releases/1/bundle/models/tiny/weights.bin"
    w2 = inst.prefix / "releases/2/bundle/models/tiny/weights.bin"
    assert w1.stat().st_ino == w2.stat().st_ino
    stage = [e for e in inst.audit() if e["action"] == "upgrade" and e["step"] == "stage"]
    assert stage[-1]["weights_referenced_files"] == len(referenced)
    r = inst("check")  # the record covers the referenced files
    assert r.returncode == 0, r.stdout + r.stderr
    record = json.loads((inst.prefix / "releases/2/record.json").read_text())
    assert "bundle/models/tiny/weights.bin" in record["files"]

    # The kept copy altered in place (same size): staging re-hashes it and refuses.
    obj = inst.prefix / "store/sha256" / next(
        r.content_sha256 for r in m.references if r.name == "models/tiny/weights.bin")
    os.chmod(obj, 0o644)
    data = bytearray(obj.read_bytes())
    data[0] ^= 0xFF
    obj.write_bytes(bytes(data))
    before = tree_snapshot(inst.prefix / "releases")
    r = inst("upgrade", make_bundle(3, reuse_from=(full,)))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "holds no intact copy" in r.stderr and "weights.bin" in r.stderr
    assert "abhed-installer check" in r.stderr and "full bundle" in r.stderr
    assert host_check_names_the_alteration(inst)
    assert tree_snapshot(inst.prefix / "releases") == before
    assert os.readlink(inst.prefix / "current") == "releases/2"


def host_check_names_the_alteration(inst: Installer) -> bool:
    """What the refusal tells the operator to run must find the altered file."""
    r = inst("check")
    return r.returncode == 8 and "models/tiny/weights.bin" in r.stdout
