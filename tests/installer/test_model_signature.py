"""The installer checks each model with the standard OpenSSF verifier from the release's venv."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import models
import models.bundle_kit
from installer import _stage

from .conftest import BundleMaker, Installer, Keys, tree_snapshot


def test_the_installer_names_the_signature_files_as_models_does() -> None:
    """The installer may not import models: its copy of the two names must not drift."""
    assert (_stage.MODEL_SIGNATURE, _stage.MODEL_SIGNING_PUB) == \
        (models.MODEL_SIGNATURE, models.MODEL_SIGNING_PUB)


@pytest.mark.slow
def test_a_model_that_does_not_match_its_signature_is_refused(
        inst: Installer, make_bundle: BundleMaker, keys: Keys, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest is signed and every member matches it, but the model signature was made
    over other weights: only the model-signing check can see it, and it refuses."""
    real = models.bundle_kit.BUNDLE_KIT.sign  # what the build signs each model directory with

    def over_other_weights(model_dir: Path, *, name: str, key: object) -> bytes:
        other = tmp_path / "other"
        shutil.copytree(model_dir, other)
        (other / "weights.bin").write_bytes(b"not the weights that ship\n")
        return real(other, name=name, key=key)  # type: ignore[arg-type]

    monkeypatch.setattr(models.bundle_kit.BUNDLE_KIT, "sign", over_other_weights)
    bundle = make_bundle(1, name="abhed-forged-model-sig")
    before = tree_snapshot(inst.prefix)
    r = inst("install", bundle, "--trust", keys.pub)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "model tiny: its files do not match their OpenSSF model signature" in r.stderr
    assert "weights.bin" in r.stderr and "Nothing was switched" in r.stderr
    assert not (inst.prefix / "current").exists()
    steps = [(e["step"], e["result"]) for e in inst.audit()]
    assert ("model-signature", "refused") in steps and ("switch", "ok") not in steps
    assert not (inst.prefix / "releases" / "1").exists()  # the staged release was removed
    assert not any(p.startswith(("releases/", "bin/")) for p in
                   set(tree_snapshot(inst.prefix)) - set(before))
