"""Hosts by role with the built binary: one signed bundle installed on a model host
(``--role model``: weights and vLLM's wheels, no microVM image, no site settings) and on an
agent host (``--role agent``: no weights and no vLLM on its disk; its gate asks the model
host's service, running from the model host's own run script, through a network that
reaches the declared endpoint only); status shows the role; an upgrade that changes only the
other role's members changes nothing; bad roles and role switches are refused with nothing
installed or switched.

Both hosts are prefixes on this machine (the simulated site of several network namespaces
is the site harness's); the model service listens on a loopback port the bundle declares.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bundle
from installer._roles import ROLES
from tests.helpers import make_wheel, wait_for

from .conftest import GATE_SCRIPT, BundleMaker, Installer, Keys, site_settings, tree_snapshot

pytestmark = pytest.mark.slow

# The model host's scripted model answers the agent hosts' gates: a glob call, then a word.
SERVE_SCRIPT = [GATE_SCRIPT[1], GATE_SCRIPT[2]] * 4
VLLM_BYTES = 2 << 20


def test_the_installer_knows_the_bundles_roles() -> None:
    assert ROLES == bundle.ROLE_NAMES  # the parser's list cannot import bundle


def _vllm_wheel(directory: Path) -> Path:
    """A stand-in for vLLM's wheels: installable, 2 MiB, named vllm (a model-only member)."""
    return make_wheel(directory, "vllm", "0.0.1", {
        "vllm/__init__.py": b"SERVES = True\n",
        "vllm/engine.bin": hashlib.sha256(b"x").digest() * (VLLM_BYTES // 32)})


class Site:
    def __init__(self, installer_bin: list[str], root: Path, make_bundle: BundleMaker) -> None:
        from installer._health import free_port

        self.root = root
        for name in ("model", "agent", "other"):
            (root / name / "sysroot/etc").mkdir(parents=True)
        self.model = Installer(installer_bin, root / "model/opt-abhed", root / "model/sysroot")
        self.agent = Installer(installer_bin, root / "agent/opt-abhed", root / "agent/sysroot")
        self.other = Installer(installer_bin, root / "other/opt-abhed", root / "other/sysroot")
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}/v1"
        self.make_bundle = make_bundle
        self.vllm = _vllm_wheel(root)

    def bundle(self, version: int, mode: str = "ask", weights: bytes = b"tiny weights v1\n" * 4096,
               **kw: Any) -> Path:
        settings = site_settings(mode)
        settings["custom_providers"][0]["base_url"] = self.endpoint
        return self.make_bundle(version, site=settings, prefix=self.agent.prefix, weights=weights,
                                script=SERVE_SCRIPT, extra_wheels=(self.vllm,), image=True,
                                roles={"hosts": ["agent", "model"],
                                       "model_endpoints": [self.endpoint]}, **kw)


@pytest.fixture(scope="module")
def site(installer_bin: list[str], tmp_path_factory: pytest.TempPathFactory,
         make_bundle: BundleMaker) -> Site:
    return Site(installer_bin, tmp_path_factory.mktemp("site"), make_bundle)


def _du(root: Path) -> int:
    seen: set[int] = set()
    total = 0
    for p in root.rglob("*"):
        st = p.lstat()
        if p.is_file() and not p.is_symlink() and st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_size
    return total


@pytest.fixture(scope="module")
def model_service(site: Site, keys: Keys) -> Iterator[subprocess.Popen[bytes]]:
    """The model host, installed by the binary with --role model, its service started from
    its own run script on the port the bundle declares."""
    r = site.model("install", site.bundle(1), "--trust", keys.pub, "--role", "model",
                   "--skip-gate")
    assert r.returncode == 0, r.stderr
    assert "role: model (no microVM image, no site settings)" in r.stdout
    proc = subprocess.Popen([str(site.model.prefix / "current/run-model-server")],
                            env={**os.environ, "ABHED_MODEL_PORT": str(site.port),
                                 "ABHED_HOME": str(site.root / "model-home")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    def answers() -> bool:
        assert proc.poll() is None, "the model service exited before it answered"
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                    site.endpoint + "/models", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    wait_for(answers, 60, poll_s=0.2, what="the model service to answer /models")
    yield proc
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


def test_a_model_host_gets_the_weights_and_vllm_and_no_image_or_settings(
        site: Site, model_service: subprocess.Popen[bytes]) -> None:
    rel = site.model.prefix / "releases/1"
    assert (rel / "bundle/models/tiny/weights.bin").is_file()
    assert list(rel.glob("venv/lib/python*/site-packages/vllm/engine.bin"))
    assert not (rel / "bundle/image").exists() and not (rel / "image").exists()
    assert not (rel / "site").exists() and not (rel / "bundle/site").exists()
    assert (rel / "run-model-server").is_file()
    status = json.loads(site.model("status", "--json").stdout)
    assert status["role"] == "model"
    assert json.loads((rel / "release.json").read_text())["role"] == "model"


def test_an_agent_host_has_no_weights_nor_vllm_and_its_gate_asks_the_model_host(
        site: Site, keys: Keys, model_service: subprocess.Popen[bytes]) -> None:
    r = site.agent("install", site.bundle(1), "--trust", keys.pub, "--role", "agent")
    assert r.returncode == 0, r.stderr
    assert f"role: agent (no weights, no vLLM, no model service here; the site's model " \
           f"service: {site.endpoint})" in r.stdout
    assert "network reaches the site's model endpoints only" in r.stderr
    prefix = site.agent.prefix
    rel = prefix / "releases/1"
    # weights and vLLM's wheels were verified, never unpacked: none of their files is here
    names = {p.name for p in prefix.rglob("*")}
    assert "weights.bin" not in names and "model.sig" not in names
    assert not list(prefix.rglob("vllm*")) and "engine.bin" not in names
    assert not (rel / "run-model-server").exists()
    # what an engineer's host needs is there: the image, the settings, the declared model's catalog
    assert (rel / "bundle/image/kernel-vmlinuz").is_file() and (rel / "site/settings.json").is_file()
    assert (rel / "bundle/models/tiny/catalog.json").is_file()
    verify = next(e for e in site.agent.audit() if e["step"] == "verify" and e["result"] == "ok")
    skipped = verify["not_unpacked_bytes"]
    assert skipped >= VLLM_BYTES + len(b"tiny weights v1\n" * 4096)
    gate = next(e for e in site.agent.audit() if e["step"] == "gate" and e["result"] == "ok")
    assert gate["role"] == "agent" and gate["model_endpoints"] == [site.endpoint]
    assert [s["name"] for s in gate["steps"]] == ["model_endpoints", "agent_tool_call"]
    status = json.loads(site.agent("status", "--json").stdout)
    assert (status["role"], status["model_endpoints"]) == ("agent", [site.endpoint])
    assert "role: agent (the site's model service" in site.agent("status").stdout
    check = site.agent("check")
    assert check.returncode == 0, check.stdout + check.stderr
    # the difference, for the report (docs/installer.md quotes the real sizes' rule)
    agent_size, model_size = _du(prefix / "releases/1"), _du(site.model.prefix / "releases/1")
    print(f"\nroles: agent release {agent_size:,} bytes, model release {model_size:,} bytes; "
          f"the agent host verified but did not unpack {skipped:,} bytes")
    # The model host did unpack what the agent host skipped. (Not a size comparison: the two
    # venvs differ by more than vLLM's stand-in -- the agent's venv gets its pip from the
    # host's ensurepip, with bytecode, the model's from the bundle's wheel -- so release sizes
    # prove nothing about the skipped members; the files do.)
    model_rel = site.model.prefix / "releases/1"
    assert list(model_rel.rglob("vllm*")) and list(model_rel.rglob("weights.bin"))


def test_an_upgrade_that_changes_only_the_other_roles_members_changes_nothing(
        site: Site, keys: Keys, model_service: subprocess.Popen[bytes]) -> None:
    # version 2 changes only the site's settings (agent members): nothing for the model host
    before = tree_snapshot(site.model.prefix / "releases"), os.readlink(site.model.prefix / "current")
    r = site.model("upgrade", site.bundle(2, mode="plan"))
    assert r.returncode == 0, r.stderr
    assert "nothing to do for role model" in r.stdout
    assert (tree_snapshot(site.model.prefix / "releases"),
            os.readlink(site.model.prefix / "current")) == before
    assert site.model.audit()[-1]["result"] == "unchanged"
    # version 3 changes only the weights (model members): nothing for the agent host
    before = tree_snapshot(site.agent.prefix / "releases"), os.readlink(site.agent.prefix / "current")
    r = site.agent("upgrade", site.bundle(3, weights=b"tiny weights v3\n" * 4096))
    assert r.returncode == 0, r.stderr
    assert "nothing to do for role agent" in r.stdout
    assert (tree_snapshot(site.agent.prefix / "releases"),
            os.readlink(site.agent.prefix / "current")) == before


def test_a_role_switch_on_upgrade_or_rollback_is_refused_unless_explicit(
        site: Site, model_service: subprocess.Popen[bytes]) -> None:
    def host() -> tuple[dict[str, str], str, str]:
        return (tree_snapshot(site.agent.prefix / "releases"),
                os.readlink(site.agent.prefix / "current"),
                (site.agent.prefix / "state/installed.json").read_text())

    before = host()
    r = site.agent("upgrade", site.bundle(2, mode="plan"), "--role", "model")
    assert r.returncode == 2 and "this host is role agent" in r.stderr
    assert "--switch-role" in r.stderr and "Nothing was changed" in r.stderr
    r = site.agent("upgrade", site.bundle(2, mode="plan"), "--switch-role")
    assert r.returncode == 2 and "--switch-role needs --role" in r.stderr
    r = site.agent("upgrade", site.bundle(2, mode="plan"), "--role", "agent", "--switch-role")
    assert r.returncode == 2 and "already role agent" in r.stderr
    assert host() == before
    assert site.agent.audit()[-1]["step"] == "role" and site.agent.audit()[-1]["result"] == "refused"


@pytest.mark.parametrize(("args", "code", "words"), [
    ((), 2, "this bundle serves roles agent, model: say which this host takes with --role"),
    (("--role", "gpu"), 2, "--role 'gpu' is not a role"),
    (("--role", "all"), 2, "serves roles agent, model, not all"),
    (("--role", "agent\n" + "x" * 5000), 2, "is not a role"),
], ids=["none", "gpu", "all", "hostile"])
def test_a_bad_role_installs_nothing(site: Site, keys: Keys, args: tuple[str, ...], code: int,
                                     words: str) -> None:
    r = site.other("install", site.bundle(1), "--trust", keys.pub, *args)
    assert r.returncode == code and words in r.stderr, r.stderr
    assert len(r.stderr) < 2000 and "Traceback" not in r.stderr
    assert not (site.other.prefix / "releases").exists()
    assert not os.path.lexists(site.other.prefix / "current")


def test_preflight_checks_what_the_role_needs(site: Site, keys: Keys,
                                              make_bundle: BundleMaker) -> None:
    gpu = make_bundle(1, name="gpu-site", platform={"accelerator": "nvidia",
                                                    "nvidia_driver_min": "535", "cuda": "12.2"},
                      site=site_settings(), prefix=site.other.prefix, image=True,
                      roles={"hosts": ["agent", "model"],
                             "model_endpoints": ["http://127.0.0.1:8000/v1"]})
    env = {"PATH": "/usr/bin:/bin"}  # no nvidia-smi on this machine, nor on the PATH
    r = site.other("preflight", gpu, "--trust", keys.pub, "--role", "agent", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["nvidia"]["status"] == "skip" and checks["nvidia"]["found"] == "role agent"
    assert checks["kvm"]["status"] != "skip"  # the microVM image is the agent's
    r = site.other("preflight", gpu, "--trust", keys.pub, "--role", "model", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert r.returncode == 4 and checks["nvidia"]["status"] == "fail"
    assert checks["kvm"]["status"] == "skip" and "package qemu-system-x86" not in checks
    r = site.other("preflight", gpu, "--trust", keys.pub, "--role", "gpu")
    assert r.returncode == 2 and "not a role" in r.stderr


def test_an_agent_hosts_gate_asks_through_the_releases_relay_recorded_as_the_gate(
        site: Site, keys: Keys, model_service: subprocess.Popen[bytes],
        tmp_path: Path) -> None:
    """The site's real shape (docs/model-service.md): the model host's front (mutual TLS)
    before its model server; the agent host holds its credential; the bundle's builder
    writes the engineers' provider through the host's relay (the settings name none). The
    gate starts the release's own relay (--gate) and asks through it as engineers would;
    the front records it as the gate, never as an engineer, and nothing else."""
    from installer._health import free_port
    from installer._site_ca import SiteCA
    from models import GATE_ENGINEER, read_requests
    from models.service import FrontSettings, ModelFront

    ca = SiteCA(tmp_path / "ca")
    ca.init("roles-site", days=30)
    front_pem = ca.issue("model-1", "model", dns=[], ips=["127.0.0.1"], days=30).pem
    agent_pem = ca.issue("agent-1", "agent", dns=[], ips=[], days=30).pem
    assert front_pem and agent_pem
    (tmp_path / "front.pem").write_bytes(front_pem)
    (tmp_path / "agent-1.pem").write_bytes(agent_pem)
    port = free_port()
    endpoint = f"https://127.0.0.1:{port}/v1"
    host = Installer(site.other.argv, site.root / "fronted/opt-abhed", site.root / "fronted/sysroot")
    (host.sysroot / "etc").mkdir(parents=True)
    host.prefix.mkdir(parents=True)
    settings = site_settings()
    del settings["default_provider"], settings["custom_providers"]  # the builder's to write
    # The socket the relay listens on is the bundle's (RELAY_SOCKET): the gate covers its
    # directory with its own tmpfs, so the host's /run is never touched beyond the folder.
    made = site.make_bundle(1, site=settings, prefix=host.prefix, script=SERVE_SCRIPT,
                            extra_wheels=(site.vllm,), image=True,
                            roles={"hosts": ["agent", "model"], "model_endpoints": [endpoint]})
    run_dir = Path("/run/abhed")  # the relay socket's folder: the gate's own, never the host's
    had = sorted(os.listdir(run_dir)) if run_dir.is_dir() else None
    record = tmp_path / "requests.sqlite"
    front = ModelFront(FrontSettings(
        listen_host="127.0.0.1", listen_port=port, ca=ca.cert_path,
        credential=tmp_path / "front.pem", crl=ca.crl_path,
        upstream=site.endpoint.removesuffix("/v1"), record=record))
    with front:
        # without the host's credential the gate says so, and nothing is installed
        r = host("install", made, "--trust", keys.pub, "--role", "agent")
        assert r.returncode != 0 and "no credential for the site's model service" in r.stderr, \
            r.stderr
        assert not os.path.lexists(host.prefix / "current")
        r = host("credential", "install", tmp_path / "agent-1.pem")
        assert r.returncode == 0, r.stdout + r.stderr
        r = host("install", made, "--trust", keys.pub, "--role", "agent")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "through the release's model relay on /run/abhed/model.sock" in r.stderr
    gate = next(e for e in host.audit() if e["step"] == "gate" and e["result"] == "ok")
    assert "through the release's model relay" in gate["steps"][0]["detail"]
    stored = [s.record for s in read_requests(record)]
    assert stored and {(s.host, s.engineer, s.outcome) for s in stored} == {
        ("agent-1", GATE_ENGINEER, "ok")}
    assert any(s.endpoint == "/v1/chat/completions" for s in stored)
    assert (sorted(os.listdir(run_dir)) if run_dir.is_dir() else None) == had


def test_a_role_switch_and_a_rollback_by_role_work(
        site: Site, keys: Keys, model_service: subprocess.Popen[bytes]) -> None:
    """An engineers' host made a model host (--switch-role, recorded; its site layer
    dropped as the operator says), then rolled back by role to the agent release it was,
    whose gate asks the model host again. (The model gate itself: test_probe_gate.)"""
    agent = site.agent
    assert os.readlink(agent.prefix / "current") == "releases/1"
    r = agent("upgrade", site.bundle(4), "--role", "model", "--switch-role", "--skip-gate")
    assert r.returncode != 0 and "--drop-site-layer" in r.stderr, r.stderr  # says what it drops
    assert os.readlink(agent.prefix / "current") == "releases/1"
    r = agent("upgrade", site.bundle(4), "--role", "model", "--switch-role", "--skip-gate",
              "--drop-site-layer")
    assert r.returncode == 0, r.stderr
    rel = agent.prefix / "releases/4"
    assert os.readlink(agent.prefix / "current") == "releases/4"
    assert (rel / "bundle/models/tiny/weights.bin").is_file() and (rel / "run-model-server").is_file()
    assert list(rel.glob("venv/lib/python*/site-packages/vllm/engine.bin"))
    assert not (rel / "site").exists() and not (rel / "bundle/image").exists()
    assert json.loads(agent("status", "--json").stdout)["role"] == "model"
    done = [e for e in agent.audit() if e["action"] == "upgrade" and e["step"] == "done"]
    assert done[-1]["result"] == "ok" and done[-1]["role"] == "model"
    # Rollback by role: refused unless said, then done, the gate an agent host's.
    r = agent("rollback", "--to", "1")
    assert r.returncode == 2 and "installed for role agent" in r.stderr
    assert "--switch-role" in r.stderr and os.readlink(agent.prefix / "current") == "releases/4"
    r = agent("rollback", "--to", "1", "--switch-role")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "network reaches the site's model endpoints only" in r.stderr
    assert os.readlink(agent.prefix / "current") == "releases/1"
    status = json.loads(agent("status", "--json").stdout)
    assert (status["role"], status["model_endpoints"]) == ("agent", [site.endpoint])
    gate = [e for e in agent.audit() if e["action"] == "rollback" and e["step"] == "gate"]
    assert gate[-1]["result"] == "ok" and gate[-1]["role"] == "agent"
    check = agent("check")
    assert check.returncode == 0, check.stdout + check.stderr
