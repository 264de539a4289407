"""Building (spec errors, reproducibility, SBOM), trust rotation, inspect/diff and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from bundle import (
    FormatError,
    SecretKey,
    SignatureError,
    SpecError,
    TrustPolicy,
    build_bundle,
    build_project_wheel,
    diff_bundles,
    inspect_bundle,
    make_rotation,
    rotate_trust,
    verify_bundle,
)
from models.bundle_kit import BUNDLE_KIT

from .conftest import make_wheel, write_inputs

REPO = Path(__file__).resolve().parents[2]


def test_same_inputs_give_a_byte_identical_bundle(tmp_path: Path, key: SecretKey) -> None:
    spec = write_inputs(tmp_path / "in")
    build_bundle(spec, tmp_path / "a.abhed", [key], model_kit=BUNDLE_KIT)
    os.utime(spec.parent / "guide.md", (1, 1))  # mtimes are not inputs
    build_bundle(spec, tmp_path / "b.abhed", [key], model_kit=BUNDLE_KIT)
    assert (tmp_path / "a.abhed").read_bytes() == (tmp_path / "b.abhed").read_bytes()
    assert not list(tmp_path.glob(".abhed-build-*")), "the work directory is cleaned up"


def test_sbom_validates_against_the_cyclonedx_schema(built: Path, trust: TrustPolicy,
                                                     tmp_path: Path) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    verify_bundle(built, trust, stage_to=tmp_path / "s")
    doc = (tmp_path / "s" / "sbom.cdx.json").read_text()
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(doc)
    assert error is None, error
    parsed = json.loads(doc)
    types = {c["type"] for c in parsed["components"]}
    assert {"library", "machine-learning-model", "operating-system", "application"} <= types
    model = next(c for c in parsed["components"] if c["type"] == "machine-learning-model")
    assert model["licenses"] == [{"license": {"name": "Apache-2.0"}}]
    assert all(f["hashes"][0]["alg"] == "SHA-256" for f in model["components"])
    # and a broken SBOM is caught by the same check, so the check can fail
    parsed["components"][0]["hashes"] = [{"alg": "SHA-256", "content": "nothex"}]
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(parsed)) is not None


def _spec_with(tmp_path: Path, change: str, old: str) -> Path:
    spec = write_inputs(tmp_path / "in")
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, change))
    return spec


@pytest.mark.parametrize("old,new,match", [
    ('dir = "models/tiny"', 'dir = "models/nope"', "is not a directory"),
    ('binary = "abhed-installer"', 'binary = "missing"', "does not exist"),
    ('version = 2', 'version = 0', "version"),
    ('accelerator = "nvidia"', 'accelerator = "tpu"', "accelerator"),
    ('[docs]', '[docs]\nextra = 1', "extra"),
    ('format = "abhed-bundle-spec/1"', 'format = "abhed-bundle-spec/9"', "format"),
    ('name = "abhed"', 'name = "abhed', "line 3, column 14: not valid TOML"),
    ('wheel = "dist/abhedagent-0.1.0-py3-none-any.whl"',
     'wheel = "dist/abhedagent-0.1.0-py3-none-any.whl"\nproject = "."', "exactly one"),
])
def test_spec_errors_are_named(tmp_path: Path, key: SecretKey, old: str, new: str,
                               match: str) -> None:
    spec = _spec_with(tmp_path, new, old)
    with pytest.raises(SpecError, match=match):
        build_bundle(spec, tmp_path / "out.abhed", [key], model_kit=BUNDLE_KIT)
    assert not (tmp_path / "out.abhed").exists()


def test_wheelhouse_must_match_the_hash_lock(tmp_path: Path, key: SecretKey) -> None:
    spec = write_inputs(tmp_path / "in")
    house = spec.parent / "wheelhouse"
    make_wheel(house, "gamma", "1.0")
    with pytest.raises(SpecError, match="gamma-1.0-py3-none-any.whl is in the wheelhouse but "
                                        "not in the lock"):
        build_bundle(spec, tmp_path / "o", [key], model_kit=BUNDLE_KIT)
    (house / "gamma-1.0-py3-none-any.whl").unlink()
    make_wheel(house, "alpha", "1.0", body="TAMPERED = 1\n")
    with pytest.raises(SpecError, match="does not match the lock"):
        build_bundle(spec, tmp_path / "o", [key], model_kit=BUNDLE_KIT)
    (house / "alpha-1.0-py3-none-any.whl").unlink()
    with pytest.raises(SpecError, match="lacks: alpha"):
        build_bundle(spec, tmp_path / "o", [key], model_kit=BUNDLE_KIT)
    (spec.parent / "requirements.lock").write_text("alpha==1.0\n")
    with pytest.raises(SpecError, match="--hash"):
        build_bundle(spec, tmp_path / "o", [key], model_kit=BUNDLE_KIT)


def test_symlink_in_model_dir_and_no_keys_are_refused(tmp_path: Path, key: SecretKey) -> None:
    spec = write_inputs(tmp_path / "in")
    with pytest.raises(SpecError, match="no signing key"):
        build_bundle(spec, tmp_path / "o", [], model_kit=BUNDLE_KIT)
    # bundle never imports models: a model is carried only with the kit that signs it.
    with pytest.raises(SpecError, match="names a model.*model_kit=models.bundle_kit.BUNDLE_KIT"):
        build_bundle(spec, tmp_path / "o", [key])
    (spec.parent / "models" / "tiny" / "link").symlink_to("/etc/passwd")
    with pytest.raises(SpecError, match="symbolic link"):
        build_bundle(spec, tmp_path / "o", [key], model_kit=BUNDLE_KIT)


@pytest.mark.slow
def test_minimal_example_builds_from_the_repository_alone(tmp_path: Path, key: SecretKey) -> None:
    """bundle/examples/minimal.toml: the agent wheel is built from this checkout by pip."""
    out = tmp_path / "minimal.abhed"
    manifest = build_bundle(REPO / "bundle" / "examples" / "minimal.toml", out, [key],
                            model_kit=BUNDLE_KIT)
    assert {c.kind for c in manifest.components} == {"agent", "model", "docs"}
    verified = verify_bundle(out, TrustPolicy(keys=(key.public_key(),)))
    assert verified.manifest.name == "abhed-minimal"


def test_key_rotation_by_old_and_new_keys_and_replay_refused() -> None:
    old, new = SecretKey.generate(), SecretKey.generate()
    current = TrustPolicy(keys=(old.public_key(),))
    statement, sig = make_rotation(current, [new.public_key()], 1, [old, new])
    nxt = rotate_trust(current, statement, sig)
    assert nxt.keys == (new.public_key(),) and nxt.version == 2
    with pytest.raises(SignatureError, match="not newer"):
        rotate_trust(nxt, statement, sig)
    # only the old key signed: the new key never proved it can sign
    statement, sig = make_rotation(current, [new.public_key()], 1, [old])
    with pytest.raises(SignatureError, match="by the new keys"):
        rotate_trust(current, statement, sig)
    # an attacker's own key introducing itself
    evil = SecretKey.generate()
    statement, sig = make_rotation(current, [evil.public_key()], 1, [evil])
    with pytest.raises(SignatureError, match="by the current keys"):
        rotate_trust(current, statement, sig)
    with pytest.raises(FormatError):
        rotate_trust(current, b'{"format": "abhed-trust/1", "version": 2, "extra": 1}', sig)
    with pytest.raises(SignatureError, match="threshold"):
        TrustPolicy(keys=(old.public_key(),), threshold=2)
    with pytest.raises(SignatureError, match="no trusted keys"):
        TrustPolicy(keys=())


def test_inspect_reads_head_and_sbom_and_reports_tar_problems(
        built: Path, trust: TrustPolicy, copy_of: object) -> None:
    info = inspect_bundle(built, trust)
    assert info.trusted and info.problems == ()
    assert info.signers[0].status == "trusted"
    assert info.sbom_summary["library"] >= 4
    unchecked = inspect_bundle(built)
    assert not unchecked.trusted and unchecked.signers[0].status == "not checked"
    stranger = TrustPolicy(keys=(SecretKey.generate().public_key(),))
    assert inspect_bundle(built, stranger).signers[0].status == "untrusted key"
    path = copy_of()  # type: ignore[operator]
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 30_000)
    problems = inspect_bundle(path, trust).problems
    assert any("truncated" in p or "not in the tar" in p for p in problems)


def test_diff_names_what_an_upgrade_changes(tmp_path: Path, key: SecretKey) -> None:
    spec = write_inputs(tmp_path / "a", version=2)
    old = build_bundle(spec, tmp_path / "a.abhed", [key], model_kit=BUNDLE_KIT)
    spec2 = write_inputs(tmp_path / "b", version=3)
    (spec2.parent / "guide.md").write_text("# New guide\n")
    new = build_bundle(spec2, tmp_path / "b.abhed", [key], model_kit=BUNDLE_KIT)
    d = diff_bundles(old, new)
    assert (d.old_version, d.new_version) == (2, 3)
    assert "docs/guide.md" in d.files_changed
    assert "image/kernel-vmlinuz" in d.files_changed  # random bytes each time
    assert "wheels/alpha-1.0-py3-none-any.whl" not in d.files_changed
    assert d.bytes_to_write > 0


def _cli(*args: str) -> tuple[int, str]:
    from cli import main

    result = CliRunner().invoke(main, ["bundle", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_end_to_end_with_exit_codes(tmp_path: Path) -> None:
    spec = write_inputs(tmp_path / "in")
    k = str(tmp_path / "k")
    assert _cli("keygen", "--out", k)[0] == 0
    assert oct((tmp_path / "k.key").stat().st_mode & 0o777) == "0o600"
    code, out = _cli("keygen", "--out", k)
    assert code == 2 and "never overwritten" in out
    b = str(tmp_path / "b.abhed")
    code, out = _cli("build", str(spec), "--out", b, "--key", f"{k}.key")
    assert code == 0, out
    code, out = _cli("verify", b, "--trust", f"{k}.pub", "--json")
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["version"] == 2
    code, out = _cli("verify", b, "--trust", f"{k}.pub", "--installed-version", "5")
    assert code == 1 and "refused: bundle version 2 is older" in out
    code, out = _cli("inspect", b, "--json")
    assert code == 0 and json.loads(out)["manifest"]["name"] == "abhed"
    code, out = _cli("inspect", b, "--trust", f"{k}.pub")
    assert code == 0 and "signature VERIFIED" in out and "machine-learning-model" in out
    code, out = _cli("split", b, "--size", "16K", "--out", str(tmp_path / "v"), "--key",
                     f"{k}.key")
    assert code == 0, out
    code, out = _cli("join", str(tmp_path / "v" / "b.abhed.volumes.json"), "--out",
                     str(tmp_path / "j.abhed"), "--trust", f"{k}.pub")
    assert code == 0, out
    assert (tmp_path / "j.abhed").read_bytes() == Path(b).read_bytes()
    code, out = _cli("diff", b, str(tmp_path / "j.abhed"))
    assert code == 0 and "version 2 -> 2" in out
    code, out = _cli("split", b, "--size", "lots", "--out", str(tmp_path / "w"), "--key",
                     f"{k}.key")
    assert code == 2 and "not a size" in out
    (tmp_path / "bad.pub").write_text("garbage\n")
    code, out = _cli("verify", b, "--trust", str(tmp_path / "bad.pub"))
    assert code == 2
    # key rotation through the CLI, then verify a bundle signed by the new key
    assert _cli("keygen", "--out", str(tmp_path / "n"))[0] == 0
    code, out = _cli("rotate", "--current", f"{k}.pub", "--new", str(tmp_path / "n.pub"),
                     "--key", f"{k}.key", "--key", str(tmp_path / "n.key"),
                     "--out", str(tmp_path / "rot.json"))
    assert code == 0, out
    b2 = str(tmp_path / "b2.abhed")
    assert _cli("build", str(spec), "--out", b2, "--key", str(tmp_path / "n.key"))[0] == 0
    assert _cli("verify", b2, "--trust", f"{k}.pub")[0] == 1
    code, out = _cli("verify", b2, "--trust", f"{k}.pub", "--rotation",
                     str(tmp_path / "rot.json"))
    assert code == 0, out


def test_bundle_package_imports_nothing_from_appliance_or_heavy() -> None:
    code = ("import sys, bundle; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('cli','appliance','tools','models','zstandard','httpx','textual','torch','vllm')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def _project(root: Path) -> Path:
    """A setuptools project with a package that has a subpackage named ``build``."""
    (root / "pkg" / "build").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinyagent"\nversion = "0.1.0"\n'
        '[tool.setuptools.packages.find]\ninclude = ["pkg*"]\n')
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "pkg" / "build" / "__init__.py").write_text("KEPT = True\n")
    return root


def test_the_agent_wheel_never_ships_what_an_earlier_build_left_behind(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    # What an earlier build left: a module since deleted from the source, and its egg-info.
    (project / "build" / "lib" / "pkg").mkdir(parents=True)
    (project / "build" / "lib" / "pkg" / "removed.py").write_text("STALE = True\n")
    (project / "tinyagent.egg-info").mkdir()
    (project / "tinyagent.egg-info" / "SOURCES.txt").write_text("pkg/removed.py\n")
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    wheel = build_project_wheel(project, tmp_path / "out", source_date_epoch=1_700_000_000)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"pkg/__init__.py", "pkg/build/__init__.py"} <= names
    assert "pkg/removed.py" not in names
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before, \
        "the project's own tree is left as it was"
    again = build_project_wheel(project, tmp_path / "again", source_date_epoch=1_700_000_000)
    assert again.read_bytes() == wheel.read_bytes()


def test_a_relative_out_folder_still_keeps_the_build_out_of_the_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`abhed bundle build spec --out x.abhed` run elsewhere: the build's folders are handed
    over as absolute paths (pip runs setuptools in the project, where a relative one names
    nothing and the checkout's own build/lib, leftovers included, would be used)."""
    project = _project(tmp_path / "proj")
    (project / "build" / "lib" / "pkg").mkdir(parents=True)
    (project / "build" / "lib" / "pkg" / "removed.py").write_text("STALE = True\n")
    monkeypatch.chdir(tmp_path)
    wheel = build_project_wheel(Path("proj"), Path("dist"))
    assert wheel.is_absolute() and wheel.parent == tmp_path / "dist"
    assert "pkg/removed.py" not in zipfile.ZipFile(wheel).namelist()
    assert not (project / "tinyagent.egg-info").exists()


def test_an_agent_project_that_does_not_build_is_named(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    (project / "pyproject.toml").write_text("[project\nname = ")
    with pytest.raises(SpecError, match=r"building the agent wheel from .*proj failed"):
        build_project_wheel(project, tmp_path / "out")
    assert not list((tmp_path / "out").iterdir()), "a failed build leaves nothing in out"
    with pytest.raises(SpecError, match=r"building the agent wheel from .*missing failed"):
        build_project_wheel(tmp_path / "missing", tmp_path / "out2")


def test_a_monorepo_link_and_a_full_out_folder_build_as_in_place(tmp_path: Path) -> None:
    """A package linked in from beside the project (a monorepo's shared code) ships as an
    in-place build ships it; an ``out`` that already holds a wheel gets the new one."""
    project = _project(tmp_path / "proj")
    (tmp_path / "shared" / "common").mkdir(parents=True)
    (tmp_path / "shared" / "common" / "__init__.py").write_text("SHARED = 1\n")
    (project / "pkg" / "common").symlink_to("../../shared/common")
    out = tmp_path / "dist"
    out.mkdir()
    (out / "older-0.0.1-py3-none-any.whl").write_bytes(b"not this one")
    wheel = build_project_wheel(project, out)
    assert wheel.name == "tinyagent-0.1.0-py3-none-any.whl" and wheel.parent == out
    assert "pkg/common/__init__.py" in zipfile.ZipFile(wheel).namelist()
    assert sorted(p.name for p in out.iterdir()) == [
        "older-0.0.1-py3-none-any.whl", "tinyagent-0.1.0-py3-none-any.whl"]
