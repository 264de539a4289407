"""Scale settings: a site CA per provider, an API key from a file or the environment (never
logged, never in argv), sessions spread over several base URLs, two sessions on one server."""

from __future__ import annotations

import datetime
import itertools
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from models import (
    CatalogEntry,
    ChatRequest,
    ProviderConfig,
    ProviderConfigError,
    ProviderHTTPError,
    ProviderUnavailable,
    ServeError,
    ServeSettings,
    VllmServer,
    open_provider,
)
from models.scripted import ScriptedServer
from tests.helpers import side_by_side

KEY = "sk-site-7f3a9c-never-logged"


def _config(url: str | list[str], **kw: object) -> ProviderConfig:
    return ProviderConfig.model_validate({"name": "site", "api": "openai", "base_url": url,
                                          "model": "scripted", "max_retries": 0, **kw})


def _ask(provider_conf: ProviderConfig, **kw: object) -> str:
    p = open_provider(provider_conf, **kw)  # type: ignore[arg-type]
    try:
        return p.complete(ChatRequest([{"role": "user", "content": "hi"}], stream=False)).text
    finally:
        p.close()


# -- API key ----------------------------------------------------------------------------------
def test_api_key_from_a_file_is_sent_as_a_bearer_token(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text(KEY + "\n")
    with ScriptedServer([{"text": "ok"}], api_key=KEY) as server:
        assert _ask(_config(server.base_url, api_key_file=str(f))) == "ok"
        assert server.authorizations[-1] == f"Bearer {KEY}"


def test_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SITE_KEY", KEY)
    with ScriptedServer([{"text": "ok"}], api_key=KEY) as server:
        assert _ask(_config(server.base_url, api_key_env="SITE_KEY")) == "ok"


def test_no_key_or_a_wrong_key_is_a_401_that_says_what_to_set(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text("sk-wrong")
    with ScriptedServer([{"text": "ok"}], api_key=KEY) as server:
        with pytest.raises(ProviderHTTPError, match="set api_key_file or api_key_env"):
            _ask(_config(server.base_url))
        with pytest.raises(ProviderHTTPError, match="API key was refused") as info:
            _ask(_config(server.base_url, api_key_file=str(f)))
    assert "sk-wrong" not in str(info.value)


@pytest.mark.parametrize("content", [b"", b"  \n", b"two words", b"bad\x01ctl", b"\xff\xfe",
                                     b"k" * 5000])
def test_hostile_key_files_are_refused_without_showing_the_key(tmp_path: Path,
                                                               content: bytes) -> None:
    f = tmp_path / "key"
    f.write_bytes(content)
    with pytest.raises(ProviderConfigError) as info:
        open_provider(_config("http://127.0.0.1:9/v1", api_key_file=str(f)))
    if content.strip():
        assert content.decode("utf-8", "replace")[:8] not in str(info.value)


def test_missing_fifo_and_directory_key_files_and_unset_variables(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, words in ((tmp_path / "absent", "cannot read"), (fifo, "not a regular file"),
                        (tmp_path, "not a regular file")):
        with pytest.raises(ProviderConfigError, match=words):
            open_provider(_config("http://127.0.0.1:9/v1", api_key_file=str(path)))
    with pytest.raises(ProviderConfigError, match="not set"):
        open_provider(_config("http://127.0.0.1:9/v1", api_key_env="ABHED_TEST_UNSET_KEY"))


def test_both_key_sources_or_a_bad_variable_name_are_refused_at_load() -> None:
    with pytest.raises(ValueError, match="not both"):
        _config("http://h/v1", api_key_file="/k", api_key_env="K")
    with pytest.raises(ValueError):
        _config("http://h/v1", api_key_env="BAD-NAME; rm -rf")


def test_the_key_never_reaches_the_event_log_or_argv(abhed_home: Path, workspace: Path,
                                                     tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text(KEY)
    with ScriptedServer([{"text": "the answer"}], api_key=KEY) as server:
        (abhed_home / "config.json").write_text(json.dumps({"custom_providers": [
            {"name": "site", "api": "openai", "base_url": server.base_url, "model": "scripted",
             "max_retries": 0, "api_key_file": str(f)}]}))
        proc = subprocess.run([sys.executable, "-m", "cli", "run", "hello",
                               "--workspace", str(workspace)], capture_output=True, text=True,
                              timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    for p in abhed_home.rglob("*"):
        if p.is_file() and p != abhed_home / "config.json":
            assert KEY.encode() not in p.read_bytes(), p


def test_vllm_gets_the_key_in_its_environment_not_its_arguments(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text(KEY)
    entry = CatalogEntry(name="m", served_name="m", weights_dir=str(tmp_path))
    server = VllmServer(entry, log_path=tmp_path / "log",
                        settings=ServeSettings(api_key_file=str(f)))
    assert KEY not in " ".join(server.command())
    assert server.environment()["VLLM_API_KEY"] == KEY
    assert "***" in repr(server.api_key()) and KEY not in repr(server.api_key())
    bad = VllmServer(entry, log_path=tmp_path / "log",
                     settings=ServeSettings(api_key_env="ABHED_TEST_UNSET_KEY"))
    with pytest.raises(ServeError, match="not set"):
        bad.environment()


# -- parallelism flags ------------------------------------------------------------------------
def test_tensor_and_pipeline_parallel_and_ray_reach_vllms_flags(tmp_path: Path) -> None:
    entry = CatalogEntry(name="big", served_name="big", weights_dir=str(tmp_path),
                         tensor_parallel_size=4, pipeline_parallel_size=2,
                         distributed_executor_backend="ray", reasoning_parser="glm45",
                         tool_call_parser="glm45")
    argv = VllmServer(entry, log_path=tmp_path / "log").command()
    pairs = dict(itertools.pairwise(argv))
    assert pairs["--tensor-parallel-size"] == "4"
    assert pairs["--pipeline-parallel-size"] == "2"
    assert pairs["--distributed-executor-backend"] == "ray"
    assert pairs["--reasoning-parser"] == "glm45"
    plain = VllmServer(CatalogEntry(name="s", served_name="s", weights_dir=str(tmp_path)),
                       log_path=tmp_path / "log").command()
    assert "--pipeline-parallel-size" not in plain and "--reasoning-parser" not in plain
    with pytest.raises(ValueError, match="reasoning_parser"):
        CatalogEntry(name="x", served_name="x", weights_dir="w", reasoning_parser="nope")
    with pytest.raises(ValueError):
        CatalogEntry(name="x", served_name="x", weights_dir="w", pipeline_parallel_size=0)


# -- several base URLs ------------------------------------------------------------------------
def test_sessions_spread_over_the_replicas_and_fail_over() -> None:
    with ScriptedServer(responder=lambda b: _text("a")) as a, \
            ScriptedServer(responder=lambda b: _text("b")) as b:
        conf = _config([a.base_url, b.base_url])
        answers = {_ask(conf) for _ in range(24)}
        assert answers == {"a", "b"}  # random first replica: all on one is 2**-23 likely
        assert _ask(conf, replica=1) == "b" and _ask(conf, replica=0) == "a"
        down = _config(["http://127.0.0.1:9/v1", b.base_url], max_retries=1)
        assert _ask(down, replica=0) == "b"


def _text(t: str) -> object:
    from models.scripted import ScriptStep

    return ScriptStep(text=t)


def test_two_concurrent_sessions_against_one_server(abhed_home: Path, tmp_path: Path) -> None:
    def answer(body: dict[str, object]) -> object:
        msgs = body["messages"]
        assert isinstance(msgs, list)
        last = msgs[-1]["content"]
        return _text(f"reply to {last}")

    with ScriptedServer(responder=answer) as server:  # type: ignore[arg-type]
        def run(who: str) -> subprocess.CompletedProcess[str]:
            # Each engineer is their own user: their own ABHED_HOME (config, event log).
            ws, home = tmp_path / who, tmp_path / f"home-{who}"
            ws.mkdir()
            home.mkdir()
            (home / "config.json").write_text(json.dumps({"custom_providers": [
                {"name": "site", "api": "openai", "base_url": server.base_url,
                 "model": "scripted", "max_retries": 0}]}))
            return subprocess.run(
                [sys.executable, "-m", "cli", "run", f"question from {who}",
                 "--workspace", str(ws)], capture_output=True, text=True, timeout=120,
                check=False, env=dict(os.environ, ABHED_HOME=str(home)))

        results = side_by_side(run, ("alice", "bob"), 150)
    for who in ("alice", "bob"):
        r = results[who]
        assert r.returncode == 0, r.stderr
        assert f"reply to question from {who}" in r.stdout
    sessions = {line.split("session: ", 1)[1].split()[0]
                for r in results.values() for line in r.stderr.splitlines() if "session: s-" in line}
    assert len(sessions) == 2


# -- a site CA ----------------------------------------------------------------------------------
def _site_pki(tmp_path: Path) -> tuple[Path, ssl.SSLContext]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Site Root CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-a")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = tmp_path / "site-ca.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = tmp_path / "server.pem"
    chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain)
    return ca_pem, ctx


def test_an_https_server_signed_by_the_site_ca(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ca_pem, server_tls = _site_pki(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with ScriptedServer([{"text": "over tls"}, {"text": "env ca"}], tls=server_tls,
                        api_key=KEY) as server:
        assert server.base_url.startswith("https://")
        monkeypatch.setenv("K", KEY)
        # The public roots do not know the site CA: refused, not silently trusted.
        with pytest.raises(ProviderUnavailable, match="CERTIFICATE_VERIFY_FAILED|certificate"):
            _ask(_config(server.base_url, api_key_env="K"))
        assert _ask(_config(server.base_url, api_key_env="K", ca_bundle=str(ca_pem))) == "over tls"
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem))  # honoured when no ca_bundle is set
        assert _ask(_config(server.base_url, api_key_env="K")) == "env ca"


def test_a_ca_bundle_that_is_not_pem_or_not_there_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_bytes(os.urandom(300))
    for path in (junk, tmp_path / "absent.pem", tmp_path):
        with pytest.raises(ProviderConfigError, match="ca_bundle"):
            open_provider(_config("https://127.0.0.1:9/v1", ca_bundle=str(path)))
