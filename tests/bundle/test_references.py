"""Weights referenced by hash: an upgrade bundle need not carry the model files an
earlier bundle carried (``reuse_weights_from``), and a manifest's references are held
to the same strictness as its members."""

from __future__ import annotations

import copy
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from bundle import (
    BundleError,
    FormatError,
    SecretKey,
    SpecError,
    TrustPolicy,
    build_bundle,
    diff_bundles,
    inspect_bundle,
    verify_bundle,
)
from models.bundle_kit import BUNDLE_KIT

from .conftest import forge, manifest_for, write_inputs


def _with_reuse(spec: Path, *earlier: Path) -> Path:
    text = spec.read_text()
    listed = ", ".join(f'"{p}"' for p in earlier)
    spec.write_text(text.replace('source_date_epoch = 1700000000',
                                 f'source_date_epoch = 1700000000\nreuse_weights_from = [{listed}]',
                                 1))
    return spec


def _two(tmp_path: Path, key: SecretKey) -> tuple[Path, Path, Path]:
    """Bundle 1 (everything carried) and the inputs of bundle 2 (same model, other agent)."""
    spec1 = write_inputs(tmp_path / "in1", version=1)
    b1 = tmp_path / "b1.abhed"
    build_bundle(spec1, b1, [key], model_kit=BUNDLE_KIT)
    spec2 = write_inputs(tmp_path / "in2", version=2)
    model2 = spec2.parent / "models/tiny"
    (model2 / "config.json").write_bytes((spec1.parent / "models/tiny/config.json").read_bytes())
    (model2 / "model.safetensors").write_bytes(
        (spec1.parent / "models/tiny/model.safetensors").read_bytes())
    return b1, spec1, spec2


def test_an_upgrade_references_the_weights_the_earlier_bundle_carried(
        tmp_path: Path, key: SecretKey, trust: TrustPolicy) -> None:
    b1, spec1, spec2 = _two(tmp_path, key)
    model2 = spec2.parent / "models/tiny"
    (model2 / "tokenizer.json").write_text('{"vocab": {"changed": 0}}')  # one file differs
    b2 = tmp_path / "b2.abhed"
    m2 = build_bundle(_with_reuse(spec2, b1), b2, [key], model_kit=BUNDLE_KIT)

    refs = {r.name: r for r in m2.references}
    assert set(refs) == {"models/tiny/config.json", "models/tiny/model.safetensors"}
    weights = model2 / "model.safetensors"
    assert refs["models/tiny/model.safetensors"].content_sha256 == hashlib.sha256(
        weights.read_bytes()).hexdigest()
    assert refs["models/tiny/model.safetensors"].carried_by == "abhed version 1"
    carried = {m.name for m in m2.members}
    assert "models/tiny/tokenizer.json" in carried  # changed: carried
    assert not any(n.startswith("models/tiny/model.safetensors") for n in carried)
    # The agent wheel and the image are identical to bundle 1's, but only model files are
    # ever referenced: the installer's store keeps nothing else.
    assert any(n.startswith("image/") for n in carried)
    model = next(c for c in m2.components if c.kind == "model")
    assert set(refs) <= set(model.members)
    m1 = inspect_bundle(b1, trust).manifest
    stored = sum(m.size for m in m1.members if m.name.startswith("models/tiny/model.safetensors"))
    assert b1.stat().st_size - b2.stat().st_size >= stored - 2048  # the weights' bytes stay home

    vb = verify_bundle(b2, trust, stage_to=tmp_path / "staged")  # references are not staged
    assert vb.manifest.references == m2.references
    assert not (tmp_path / "staged/models/tiny/model.safetensors").exists()
    assert (tmp_path / "staged/models/tiny/tokenizer.json").is_file()
    info = inspect_bundle(b2, trust)
    assert info.trusted and info.problems == ()
    d = diff_bundles(inspect_bundle(b1, trust).manifest, m2)
    assert "models/tiny/model.safetensors" not in d.files_removed + d.files_changed
    assert [f for f in d.files_changed if f.startswith("models/")] == [
        "models/tiny/model.sig", "models/tiny/tokenizer.json"]  # a new file: a new signature
    assert d.bytes_to_write < weights.stat().st_size

    # A third bundle gathered against the second keeps the first as the carrier.
    spec3 = write_inputs(tmp_path / "in3", version=3)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (spec3.parent / "models/tiny" / name).write_bytes((model2 / name).read_bytes())
    m3 = build_bundle(_with_reuse(spec3, b2), tmp_path / "b3.abhed", [key], model_kit=BUNDLE_KIT)
    assert {r.name: r.carried_by for r in m3.references} == {
        "models/tiny/config.json": "abhed version 1",
        "models/tiny/model.safetensors": "abhed version 1",
        "models/tiny/tokenizer.json": "abhed version 2"}


def test_a_bundle_without_references_writes_no_references_key(built: Path) -> None:
    with open(built, "rb") as f:
        head = f.read(1 << 16)
    assert b'"references"' not in head  # older verifiers still read a full bundle


def test_reuse_from_something_that_is_not_a_bundle_is_refused(tmp_path: Path,
                                                              key: SecretKey) -> None:
    spec = write_inputs(tmp_path / "in")
    junk = tmp_path / "junk.abhed"
    junk.write_bytes(b"not a tar" * 100)
    with pytest.raises(SpecError, match=r"reuse_weights_from: .*junk\.abhed"):
        build_bundle(_with_reuse(spec, junk), tmp_path / "out.abhed", [key], model_kit=BUNDLE_KIT)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    spec = write_inputs(tmp_path / "in-fifo")
    with pytest.raises(SpecError, match="not a regular file|FIFO|pipe"):
        build_bundle(_with_reuse(spec, fifo), tmp_path / "out2.abhed", [key], model_kit=BUNDLE_KIT)
    spec = write_inputs(tmp_path / "in-missing")
    with pytest.raises(SpecError, match="reuse_weights_from"):
        build_bundle(_with_reuse(spec, tmp_path / "nowhere.abhed"), tmp_path / "o3.abhed", [key],
                     model_kit=BUNDLE_KIT)
    assert not list(tmp_path.glob("out*.abhed"))


def _referencing(members: list[tuple[str, bytes]]) -> dict[str, Any]:
    m = manifest_for(members)
    data = b"weights" * 100
    m["references"] = [{"name": "models/m/w.bin", "content_size": len(data),
                        "content_sha256": hashlib.sha256(data).hexdigest(),
                        "carried_by": "forged version 1"}]
    m["components"] = [*m["components"],  # type: ignore[misc]
                       {"kind": "model", "name": "m", "version": None, "licence": None,
                        "source": None, "members": ["models/m/w.bin"]}]
    return m


_MEMBERS = [("sbom.cdx.json", b"{}"), ("docs/a.md", b"# a\n")]


@pytest.mark.parametrize("change, refusal", [
    (lambda m: m["references"][0].update(name="../escape.bin"), "traversal|models/"),
    (lambda m: m["references"][0].update(name="docs/a.md"), "model file"),
    (lambda m: m["references"][0].update(name="models/m/w.bin.zst"), "zst"),
    (lambda m: m["references"][0].update(content_sha256="XYZ"), "references"),
    (lambda m: m["references"][0].update(content_size=-1), "references"),
    (lambda m: m["references"][0].update(carried_by=""), "references"),
    (lambda m: m["references"][0].update(extra=1), r"references\[0\].extra: unknown key"),
    (lambda m: m["references"].append(dict(m["references"][0])), "collides"),
    (lambda m: m["components"][0]["members"].append("models/m/w.bin"), "only model components"),
    (lambda m: m["components"].pop(), "belong to no component"),
    (lambda m: m.update(references={"name": "x"}), "references"),
], ids=["traversal", "not-a-model-file", "zst-name", "bad-hash", "negative-size",
        "no-carrier", "unknown-field", "twice", "docs-owns-it", "orphan", "not-a-list"])
def test_hostile_references_are_refused_by_name(tmp_path: Path, key: SecretKey,
                                                trust: TrustPolicy, change: Any,
                                                refusal: str) -> None:
    good = _referencing(_MEMBERS)
    assert verify_bundle(forge(tmp_path / "ok.abhed", good, _MEMBERS, [key]), trust).manifest \
        .references[0].name == "models/m/w.bin"
    bad = copy.deepcopy(good)
    change(bad)
    path = forge(tmp_path / "bad.abhed", bad, _MEMBERS, [key])
    with pytest.raises(BundleError, match=refusal):
        verify_bundle(path, trust)


def test_a_reference_colliding_with_a_member_is_refused(tmp_path: Path, key: SecretKey,
                                                        trust: TrustPolicy) -> None:
    members = [*_MEMBERS, ("models/m/w.bin", b"carried")]
    m = _referencing(members)
    m["components"][0]["members"].remove("models/m/w.bin")  # type: ignore[index]
    path = forge(tmp_path / "b.abhed", m, members, [key])
    with pytest.raises(FormatError, match="collides"):
        verify_bundle(path, trust)


def test_an_oversized_reference_list_is_refused(tmp_path: Path, key: SecretKey,
                                                trust: TrustPolicy) -> None:
    m = _referencing(_MEMBERS)
    ref = m["references"][0]
    m["references"] = [dict(ref, name=f"models/m/w{i}.bin") for i in range(100_001)]
    path = forge(tmp_path / "b.abhed", m, _MEMBERS, [key])
    with pytest.raises(FormatError, match=re.compile("cap|references", re.I)):
        verify_bundle(path, trust)
