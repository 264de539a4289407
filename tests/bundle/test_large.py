"""A large sparse member: build and verify stream it with bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bundle import SecretKey, build_bundle
from models.bundle_kit import BUNDLE_KIT

SIZE = 256 * 2**20
RSS_CAP_KIB = 120 * 1024  # the interpreter + pydantic + cryptography take ~60 MiB


@pytest.mark.slow
def test_large_sparse_member_streams_with_bounded_memory(tmp_path: Path, key: SecretKey) -> None:
    model = tmp_path / "model"
    model.mkdir()
    with open(model / "weights.bin", "wb") as f:  # sparse: no disk used for the input
        f.truncate(SIZE)
        f.seek(SIZE - 5)
        f.write(b"tail!")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "format": "abhed-bundle-spec/1", "name": "large", "version": 1, "compression": "none",
        "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                     "accelerator": "cpu"},
        "model": [{"name": "big", "dir": "model", "licence": "none", "source": "test"}],
    }))
    out = tmp_path / "large.abhed"
    build_bundle(spec, out, [key], model_kit=BUNDLE_KIT)
    assert out.stat().st_size > SIZE
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from bundle import verify_bundle, TrustPolicy, PublicKey\n"
        f"t = TrustPolicy(keys=(PublicKey.from_base64({key.public_key().to_base64()!r}),))\n"
        f"r = verify_bundle(Path({str(out)!r}), t)\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(r.manifest.members[1].size, hwm)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)
    size, rss_kib = map(int, done.stdout.split())
    assert size == SIZE
    # VmHWM, not ru_maxrss: Linux carries the pre-exec (forked pytest) peak into
    # ru_maxrss, so it measured the test runner's size, not verify's.
    assert rss_kib < RSS_CAP_KIB, f"verify peaked at {rss_kib} KiB for a {SIZE}-byte member"
