"""The operator's verbs for the model service: the site CA, host credentials, revocation
lists and enrolled engineers; idempotent, exit-coded, recorded in the audit chain.

Run in-process through ``installer.main`` (the verbs are plain files and cryptography;
the frozen binary runs the same code), with real X.509 from cryptography, and the
engineers' list read back by the relay's own reader (``models.service._enrolment``)."""

from __future__ import annotations

import datetime
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from installer import ExitCode, main
from installer._audit import AuditLog
from installer._site_ca import SiteCA
from models.service._enrolment import Enrolment


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    got = capsys.readouterr()
    return code, got.out + got.err


@pytest.fixture
def ca(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, text = _run(capsys, "ca", "init", tmp_path / "ca", "--site", "lab")
    assert code == 0 and text.startswith("made"), text
    return tmp_path / "ca"


def test_ca_init_is_kept_and_its_key_is_private(ca: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(capsys, "ca", "init", ca, "--site", "lab")
    assert code == 0 and text.startswith("kept"), text
    assert stat.S_IMODE(ca.stat().st_mode) == 0o700
    assert stat.S_IMODE((ca / "ca.key").stat().st_mode) == 0o600
    steps = [(e["action"], e["step"], e["result"]) for _, e in AuditLog(ca / "audit").entries()]
    assert steps == [("ca", "init", "ok"), ("ca", "init", "unchanged")]
    AuditLog(ca / "audit").verify()


def test_issue_keeps_a_valid_credential_rotate_replaces_and_revokes_it(
        ca: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cryptography import x509

    code, text = _run(capsys, "ca", "issue", ca, "--host", "agent-1", "--role", "agent",
                      "--out", tmp_path / "a1.pem")
    assert code == 0 and text.startswith("issued"), text
    assert stat.S_IMODE((tmp_path / "a1.pem").stat().st_mode) == 0o600
    first = x509.load_pem_x509_certificates((tmp_path / "a1.pem").read_bytes())[0]
    code, text = _run(capsys, "ca", "issue", ca, "--host", "agent-1", "--role", "agent",
                      "--out", tmp_path / "again.pem")
    assert code == 0 and text.startswith("unchanged") and not (tmp_path / "again.pem").exists()
    code, text = _run(capsys, "ca", "issue", ca, "--host", "agent-1", "--role", "agent",
                      "--out", tmp_path / "a1.pem", "--rotate")
    assert code == 0 and "earlier credential is revoked" in text, text
    crl = x509.load_pem_x509_crl((ca / "crl.pem").read_bytes())
    assert [r.serial_number for r in crl] == [first.serial_number]
    code, text = _run(capsys, "ca", "revoke", ca, "--host", "agent-1")
    assert code == 0 and text.startswith("revoked"), text
    code, text = _run(capsys, "ca", "revoke", ca, "--host", "agent-1")
    assert code == 0 and text.startswith("unchanged"), text
    code, text = _run(capsys, "ca", "revoke", ca, "--host", "never-issued")
    assert code == ExitCode.USAGE and "no credential was ever issued" in text
    AuditLog(ca / "audit").verify()


@pytest.mark.parametrize("bad", [["--host", "bad host"], ["--role", "gpu"],
                                 ["--ip", "not-an-ip"], ["--dns", "a b"]])
def test_issue_refuses_malformed_input(ca: Path, tmp_path: Path, bad: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    argv = {"--host": "h1", "--role": "agent"}
    extra: list[str] = []
    if bad[0] in argv:
        argv[bad[0]] = bad[1]
    else:
        extra = bad
    try:
        code, text = _run(capsys, "ca", "issue", ca, *[x for kv in argv.items() for x in kv],
                          *extra, "--out", tmp_path / "x.pem")
    except SystemExit as exc:  # argparse's choices
        code, text = int(str(exc.code)), ""
    assert code == ExitCode.USAGE, text
    assert not (tmp_path / "x.pem").exists()


@pytest.mark.parametrize("days", ["0", "-3", "x", "99999"])
def test_a_validity_out_of_range_is_a_usage_error(ca: Path, tmp_path: Path, days: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["ca", "issue", str(ca), "--host", "h", "--role", "agent", "--days", days,
              "--out", str(tmp_path / "x.pem")])
    assert exc.value.code == ExitCode.USAGE and not (tmp_path / "x.pem").exists()


def test_issue_into_a_missing_directory_is_refused_before_anything_is_issued(
        ca: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(capsys, "ca", "issue", ca, "--host", "h", "--role", "agent",
                      "--out", tmp_path / "nowhere" / "h.pem")
    assert code == ExitCode.USAGE and "not a directory" in text
    assert json.loads((ca / "issued.json").read_text())["issued"] == []


def test_a_verb_without_a_ca_says_how_to_make_one(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(capsys, "ca", "issue", tmp_path / "none", "--host", "h", "--role",
                      "agent", "--out", tmp_path / "x.pem")
    assert code == ExitCode.USAGE and "ca init" in text


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    p = tmp_path / "opt-abhed"
    p.mkdir()
    return p


def test_credential_install_pins_the_ca_and_refuses_anothers_expired_or_tampered(
        ca: Path, tmp_path: Path, prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, "ca", "issue", ca, "--host", "agent-1", "--role", "agent",
         "--out", tmp_path / "a1.pem")
    code, text = _run(capsys, "credential", "install", tmp_path / "a1.pem", "--prefix", prefix)
    assert code == 0 and "as agent-1" in text, text
    held = prefix / "state/credential/host.pem"
    assert stat.S_IMODE(held.stat().st_mode) == 0o600 and held.stat().st_uid == 0
    code, text = _run(capsys, "credential", "install", tmp_path / "a1.pem", "--prefix", prefix)
    assert code == 0 and text.startswith("unchanged"), text
    before = held.read_bytes()
    other = SiteCA(tmp_path / "other")
    other.init("elsewhere", days=30)
    foreign = other.issue("agent-1", "agent", dns=[], ips=[], days=30)
    old = SiteCA(ca).issue("agent-2", "agent", dns=[], ips=[], days=1,
                           valid_from=datetime.datetime.now(datetime.UTC)
                           - datetime.timedelta(days=5))
    assert foreign.pem and old.pem
    (tmp_path / "foreign.pem").write_bytes(foreign.pem)
    (tmp_path / "old.pem").write_bytes(old.pem)
    (tmp_path / "junk.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n")
    (tmp_path / "big.pem").write_bytes(b"x" * (2 << 20))
    for name, says in (("foreign", "another CA"), ("old", "not now"),
                       ("junk", "not a host credential"), ("big", "")):
        code, text = _run(capsys, "credential", "install", tmp_path / f"{name}.pem",
                          "--prefix", prefix)
        assert code == ExitCode.USAGE and says in text, (name, text)
        assert held.read_bytes() == before  # nothing changed
    refused = [e for _, e in AuditLog(prefix / "audit").entries() if e["result"] == "refused"]
    assert len(refused) == 3  # the oversized file is refused before it is read
    AuditLog(prefix / "audit").verify()


def test_crl_install_refuses_a_foreign_or_older_list(
        ca: Path, tmp_path: Path, prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(capsys, "credential", "crl", ca / "crl.pem", "--prefix", prefix)
    assert code == ExitCode.USAGE and "credential install" in text
    _run(capsys, "ca", "issue", ca, "--host", "model-a", "--role", "model", "--ip", "10.0.0.5",
         "--out", tmp_path / "m.pem")
    assert _run(capsys, "credential", "install", tmp_path / "m.pem", "--prefix", prefix)[0] == 0
    first = (ca / "crl.pem").read_bytes()
    _run(capsys, "ca", "revoke", ca, "--host", "model-a")
    code, text = _run(capsys, "credential", "crl", ca / "crl.pem", "--prefix", prefix)
    assert code == 0 and "number 2" in text, text
    (tmp_path / "old-crl.pem").write_bytes(first)
    code, text = _run(capsys, "credential", "crl", tmp_path / "old-crl.pem", "--prefix", prefix)
    assert code == ExitCode.USAGE and "older" in text
    other = SiteCA(tmp_path / "other")
    other.init("elsewhere", days=30)
    code, text = _run(capsys, "credential", "crl", other.crl_path, "--prefix", prefix)
    assert code == ExitCode.USAGE and "not signed by the site CA" in text
    assert (prefix / "state/credential/crl.pem").read_bytes() == (ca / "crl.pem").read_bytes()


def test_engineer_enroll_and_revoke_are_what_the_relay_reads(
        prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listing = prefix / "state/engineers.json"
    relay = Enrolment(listing)
    assert relay.check("nobody", 65534) is not None
    code, text = _run(capsys, "engineer", "enroll", "nobody", "--prefix", prefix)
    assert code == 0 and text.startswith("enrolled"), text
    assert relay.check("nobody", 65534) is None
    assert "uid 1" in str(relay.check("nobody", 1))  # same name, another account
    assert _run(capsys, "engineer", "enroll", "nobody", "--prefix", prefix)[1].startswith(
        "unchanged")
    code, text = _run(capsys, "engineer", "enroll", "no-such-user-xyz", "--prefix", prefix)
    assert code == ExitCode.USAGE and "no user" in text
    # The name the health gate's requests are recorded under is no engineer's.
    from installer._verbs.engineer import GATE_ENGINEER
    from models import GATE_ENGINEER as RECORDED

    assert GATE_ENGINEER == RECORDED
    code, text = _run(capsys, "engineer", "enroll", GATE_ENGINEER, "--prefix", prefix)
    assert code == ExitCode.USAGE and "health gate" in text
    code, text = _run(capsys, "engineer", "revoke", "nobody", "--prefix", prefix)
    assert code == 0 and text.startswith("revoked"), text
    os.utime(listing, ns=(1, 1))  # a rewrite within the same tick is still seen (size differs)
    assert "not enrolled" in str(relay.check("nobody", 65534))
    steps = [(e["action"], e["step"], e["result"]) for _, e in AuditLog(prefix / "audit").entries()]
    assert steps == [("engineer", "enroll", "ok"), ("engineer", "enroll", "refused"),
                     ("engineer", "enroll", "refused"), ("engineer", "revoke", "ok")]
    listing.write_text("{broken")
    assert "damaged" in str(relay.check("nobody", 65534))


def test_a_model_hosts_credential_brings_the_key_vllm_demands_and_the_doors_units(
        ca: Path, tmp_path: Path, prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    from installer._layout import Layout
    from installer._services import (
        front_unit_text,
        relay_unit_text,
        render_run_script,
        vllm_key_path,
    )

    layout = Layout(prefix)
    _run(capsys, "ca", "issue", ca, "--host", "model-a", "--role", "all", "--ip", "127.0.0.1",
         "--out", tmp_path / "m.pem")
    assert _run(capsys, "credential", "install", tmp_path / "m.pem", "--prefix", prefix)[0] == 0
    key = vllm_key_path(layout)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    script = tmp_path / "run"
    script.write_text(render_run_script(1, ["/usr/bin/env"], {}, layout))
    env = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout
    assert f"VLLM_API_KEY={key.read_text().strip()}" in env.splitlines()
    front = front_unit_text(layout)
    assert f"--api-key-file {key}" in front and "--crl" in front and "model-front" in front
    relay = relay_unit_text(layout, ["https://model-a:8443", "https://model-b:8443"])
    assert "--socket /run/abhed/model.sock" in relay
    assert relay.count("--upstream") == 2 and "engineers.json" in relay
    # An agent host's credential makes no vLLM key.
    other = tmp_path / "agent-prefix"
    other.mkdir()
    _run(capsys, "ca", "issue", ca, "--host", "agent-1", "--role", "agent",
         "--out", tmp_path / "a.pem")
    assert _run(capsys, "credential", "install", tmp_path / "a.pem", "--prefix", other)[0] == 0
    assert not vllm_key_path(Layout(other)).exists()


@pytest.mark.slow
def test_the_built_binary_runs_the_verbs(installer_bin: list[str], tmp_path: Path) -> None:
    """The frozen installer carries cryptography's X.509 and these verbs (imported by name)."""
    import subprocess

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*installer_bin, *[str(a) for a in args]], capture_output=True,
                              text=True, timeout=120, check=False)

    prefix = tmp_path / "opt-abhed"
    prefix.mkdir()
    for argv in (("ca", "init", tmp_path / "ca", "--site", "lab"),
                 ("ca", "issue", tmp_path / "ca", "--host", "dev-1", "--role", "agent",
                  "--out", tmp_path / "dev-1.pem"),
                 ("credential", "install", tmp_path / "dev-1.pem", "--prefix", prefix),
                 ("engineer", "enroll", "nobody", "--prefix", prefix)):
        done = run(*argv)
        assert done.returncode == 0, (argv, done.stdout + done.stderr)
    assert run("ca", "issue", tmp_path / "ca", "--host", "bad host", "--role", "agent",
               "--out", tmp_path / "x.pem").returncode == ExitCode.USAGE
    assert Enrolment(prefix / "state/engineers.json").check("nobody", 65534) is None


def test_every_model_host_gets_the_sites_one_vllm_key_and_an_agent_host_none(
        ca: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Behind one router the front's key must open every host's vLLM: the CA makes the
    site's key once and each model host's credential carries it (installer._site_ca)."""
    from installer._layout import Layout
    from installer._services import vllm_key_path

    keys = []
    for host in ("model-1", "model-2"):
        prefix = tmp_path / f"opt-{host}"
        prefix.mkdir()
        cred = tmp_path / f"{host}.pem"
        assert _run(capsys, "ca", "issue", ca, "--host", host, "--role", "model",
                    "--out", cred)[0] == 0
        code, text = _run(capsys, "credential", "install", cred, "--prefix", prefix)
        assert code == 0 and "installed: the site's vLLM key" in text, text
        key = vllm_key_path(Layout(prefix))
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        keys.append(key.read_text())
        # The key never lands in host.pem, which holds the host's key and certificate.
        assert b"VLLM KEY" not in (prefix / "state/credential/host.pem").read_bytes()
    assert keys[0] == keys[1] == (ca / "vllm.key").read_text()
    assert stat.S_IMODE((ca / "vllm.key").stat().st_mode) == 0o600
    issued = [e for _, e in AuditLog(ca / "audit").entries() if e["step"] == "issue"]
    assert [e.get("vllm_key") for e in issued] == ["made", "shared"]
    assert keys[0].strip() not in (ca / "issued.json").read_text()
    for _, entry in AuditLog(ca / "audit").entries():
        assert keys[0].strip() not in json.dumps(entry)  # a digest, never the key
    assert b"VLLM KEY" not in _issue(capsys, ca, tmp_path, "agent-9", "agent")


def _issue(capsys: pytest.CaptureFixture[str], ca: Path, tmp_path: Path, host: str,
           role: str) -> bytes:
    out = tmp_path / f"{host}.pem"
    assert _run(capsys, "ca", "issue", ca, "--host", host, "--role", role, "--out", out)[0] == 0
    return out.read_bytes()


def test_a_host_key_of_its_own_is_replaced_by_the_sites_and_the_install_is_idempotent(
        ca: Path, tmp_path: Path, prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model host set up before the site's key (its own, made at install) takes the
    site's from its next credential, recorded; installing the same file again changes
    nothing."""
    from installer._layout import Layout
    from installer._services import vllm_key_path

    key = vllm_key_path(Layout(prefix))
    key.parent.mkdir(parents=True)
    key.write_text("its-own-key-made-before-the-site-had-one-000\n")
    cred = tmp_path / "m.pem"
    cred.write_bytes(_issue(capsys, ca, tmp_path, "model-1", "model"))
    code, text = _run(capsys, "credential", "install", cred, "--prefix", prefix)
    assert code == 0 and "replaced: the site's vLLM key" in text, text
    assert key.read_text() == (ca / "vllm.key").read_text()
    code, text = _run(capsys, "credential", "install", cred, "--prefix", prefix)
    assert code == 0 and text.startswith("unchanged"), text
    last = [e for _, e in AuditLog(prefix / "audit").entries()][-1]
    assert last["vllm_key"] == "replaced" and len(last["vllm_key_sha256"]) == 16


@pytest.mark.parametrize("damage", [
    lambda pem: pem.replace(b"-----END ABHED VLLM KEY-----\n", b""),  # cut
    lambda pem: pem.replace(b"-----BEGIN ABHED VLLM KEY-----\n",
                            b"-----BEGIN ABHED VLLM KEY-----\n$(rm -rf /)\n"),  # hostile
    lambda pem: pem + pem[pem.index(b"-----BEGIN ABHED"):],  # two keys
    lambda pem: pem.replace(b"-----BEGIN ABHED VLLM KEY-----\n",
                            b"-----BEGIN ABHED VLLM KEY-----\n" + b"A" * 5000),  # oversized
])
def test_a_malformed_vllm_key_block_installs_nothing(
        ca: Path, tmp_path: Path, prefix: Path, capsys: pytest.CaptureFixture[str],
        damage: Any) -> None:
    from installer._layout import Layout
    from installer._services import vllm_key_path

    cred = tmp_path / "bad.pem"
    cred.write_bytes(damage(_issue(capsys, ca, tmp_path, "model-1", "model")))
    code, text = _run(capsys, "credential", "install", cred, "--prefix", prefix)
    assert code == ExitCode.USAGE and "ABHED VLLM KEY block" in text, text
    assert "issue the credential again" in text
    assert not vllm_key_path(Layout(prefix)).exists()
    assert not (prefix / "state/credential/host.pem").exists()


def test_a_model_hosts_credential_file_loads_as_is_in_tls(
        ca: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The vLLM key's block is base64 like any PEM block's, so the issued file itself still
    loads as a TLS key and chain (OpenSSL skips a block it does not know, not a bad one)."""
    import ssl

    cred = tmp_path / "m.pem"
    cred.write_bytes(_issue(capsys, ca, tmp_path, "model-1", "all"))
    assert b"BEGIN ABHED VLLM KEY" in cred.read_bytes()
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cred)
