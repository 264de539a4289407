"""OpenSSF model signatures: deterministic, checked by the standard command, hostile files refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from bundle import SecretKey
from models import (
    MODEL_SIGNATURE,
    MODEL_SIGNING_PUB,
    CatalogEntry,
    ServeError,
    public_key_pem,
    sign_model,
    signature_identity,
    verify_model,
)

CLI = Path(sys.executable).parent / "model_signing"


def _model(root: Path) -> Path:
    root.mkdir()
    (root / "config.json").write_text('{"layers": 1}')
    (root / "model.safetensors").write_bytes(os.urandom(4096))
    (root / "sub").mkdir()
    (root / "sub" / "tokenizer.json").write_text("{}")
    (root / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    return root


def _signed(root: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    (root / MODEL_SIGNATURE).write_bytes(sign_model(root, name="tiny", key=key))
    (root / MODEL_SIGNING_PUB).write_bytes(public_key_pem(key))
    return root


def _cli(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), "verify", "key", "--signature", str(root / MODEL_SIGNATURE),
                           "--public_key", str(root / MODEL_SIGNING_PUB), str(root)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_signature_is_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    """A bundle build is reproducible only if the signature is (the library's is not)."""
    root = _model(tmp_path / "m")
    script = ("import sys, hashlib; from pathlib import Path; from bundle import SecretKey; "
              "from models import sign_model; k = SecretKey(key_id=b'12345678', seed=bytes(32))"
              ".model_signing_key(); print(hashlib.sha256(sign_model(Path(sys.argv[1]), "
              "name='tiny', key=k)).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True,
                              text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed}
                              ).stdout for seed in ("1", "2", "3")}
    assert len(digests) == 1


def test_the_derived_key_is_p256_fixed_per_release_key_and_distinct_between_keys() -> None:
    a = SecretKey(key_id=b"12345678", seed=bytes(32))
    same = SecretKey(key_id=b"87654321", seed=bytes(32))
    other = SecretKey(key_id=b"12345678", seed=b"\1" * 32)
    assert isinstance(a.model_signing_key().curve, ec.SECP256R1)
    assert public_key_pem(a.model_signing_key()) == public_key_pem(same.model_signing_key())
    assert public_key_pem(a.model_signing_key()) != public_key_pem(other.model_signing_key())


def test_the_standard_command_and_abhed_agree_on_a_signed_model(tmp_path: Path) -> None:
    key = SecretKey.generate().model_signing_key()
    root = _signed(_model(tmp_path / "m"), key)
    done = _cli(root)
    assert done.returncode == 0 and "Verification succeeded" in done.stdout, done.stderr
    identity = verify_model(root)
    assert identity == signature_identity(root)
    assert identity["key_sha256"] == __import__("hashlib").sha256(public_key_pem(key)).hexdigest()
    assert signature_identity(tmp_path) is None  # unsigned: nothing to name


@pytest.mark.parametrize("harm, words", [
    (lambda r: (r / "sub" / "tokenizer.json").write_text('{"x": 1}'), "altered: sub/tokenizer.json"),
    (lambda r: (r / "added.bin").write_bytes(b"x"), "not signed: added.bin"),
    (lambda r: (r / "config.json").unlink(), "missing: config.json"),
    (lambda r: (r / MODEL_SIGNATURE).write_text("not json"), "JSONDecodeError"),
    (lambda r: (r / MODEL_SIGNATURE).write_bytes(b"\xff" * 100), "UnicodeDecodeError"),
    (lambda r: (r / MODEL_SIGNATURE).write_text(json.dumps({"mediaType": "x"})), "KeyError"),
    (lambda r: (r / MODEL_SIGNING_PUB).write_bytes(
        public_key_pem(ec.generate_private_key(ec.SECP256R1()))), "Key mismatch"),
    (lambda r: (r / MODEL_SIGNING_PUB).write_text("-----BEGIN PUBLIC KEY-----\nxx\n"),
     "ValueError"),
    (lambda r: (r / MODEL_SIGNING_PUB).unlink(), "is missing"),
])
def test_a_harmed_model_is_refused_naming_what(tmp_path: Path, harm: object, words: str) -> None:
    root = _signed(_model(tmp_path / "m"), ec.generate_private_key(ec.SECP256R1()))
    harm(root)  # type: ignore[operator]
    with pytest.raises(ServeError) as caught:
        verify_model(root)
    assert words in str(caught.value) and "einstall the model" in str(caught.value)
    if (root / MODEL_SIGNING_PUB).is_file():
        assert _cli(root).returncode != 0  # the standard command refuses it too


def test_the_catalog_checks_a_signed_model_by_its_signature_and_git_files_by_digest(
        tmp_path: Path) -> None:
    from models import hash_weights

    root = _model(tmp_path / "m")
    files = hash_weights(root)
    _signed(root, ec.generate_private_key(ec.SECP256R1()))
    entry = CatalogEntry(name="tiny", served_name="tiny", weights_dir=str(root), files=files)
    assert entry.verify_weights() == root
    # .gitattributes is left out of the signature (the library's default, so the plain
    # command agrees) but the catalog still holds its digest: it is checked that way.
    (root / ".gitattributes").write_text("changed\n")
    with pytest.raises(ServeError, match=r"\.gitattributes was altered"):
        entry.verify_weights()
    (root / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    # A catalog that disagrees with the signature is refused, whatever the files say.
    wrong = CatalogEntry(name="tiny", served_name="tiny", weights_dir=str(root),
                         files={**files, "config.json": "0" * 64})
    with pytest.raises(ServeError, match="catalog entry 'tiny' and the model's signature disagree"):
        wrong.verify_weights()


def test_a_key_of_another_curve_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="P-256"):
        sign_model(_model(tmp_path / "m"), name="x", key=ec.generate_private_key(ec.SECP384R1()))
