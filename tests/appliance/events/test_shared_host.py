"""A shared GPU host, with real Unix users (setpriv): engineer B cannot touch A's record, and A
cannot rewrite their own without the service account's witness noticing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.appliance.events.logs import Cli, sha

ANA, BEN, SERVICE = 1001, 1002, 1003

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating two users' files needs root (CI is root)"),
]


@dataclass(frozen=True)
class Host:
    witness: Path
    homes: dict[int, Path]
    workspaces: dict[int, Path]

    def log(self, uid: int) -> Path:
        return self.homes[uid] / "state" / "events.db"


def _owned(path: Path, uid: int, mode: int) -> Path:
    path.mkdir()
    os.chown(path, uid, uid)
    os.chmod(path, mode)
    return path


@pytest.fixture
def host() -> Iterator[Host]:
    base = Path(tempfile.mkdtemp(prefix="abhed-host-")).resolve()
    try:
        os.chmod(base, 0o755)
        witness = _owned(base / "witness", SERVICE, 0o755)
        _owned(witness / "inbox", SERVICE, 0o1733)
        _owned(witness / "heads", SERVICE, 0o755)
        homes, spaces = {}, {}
        for uid in (ANA, BEN):
            homes[uid] = _owned(base / f"home-{uid}", uid, 0o700)
            spaces[uid] = _owned(base / f"ws-{uid}", uid, 0o755)
            config = homes[uid] / "config.json"
            config.write_text(json.dumps({"events": {"witness_dir": str(witness)}}))
            os.chown(config, uid, uid)
        yield Host(witness, homes, spaces)
    finally:
        shutil.rmtree(base)


def as_user(uid: int, *code: str) -> subprocess.CompletedProcess[str]:
    """Run Python as ``uid`` (no capabilities, no groups)."""
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           sys.executable, "-c", "\n".join(code)], capture_output=True, text=True,
                          timeout=60, check=False)


def test_one_engineer_cannot_touch_anothers_record(abhed: Cli, host: Host) -> None:
    for _ in range(2):
        done = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(host.workspaces[ANA]),
                     user=ANA, home=host.homes[ANA])
        assert done.returncode == 0, done.stderr
    log = host.log(ANA)
    before = sha(log)
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    # Ben, pointing ABHED_HOME at Ana's home: one clear refusal, nothing changed.
    for argv in (("sessions", "list"), ("tool", "glob", '{"pattern": "*"}', "-w",
                                         str(host.workspaces[BEN]))):
        done = abhed(*argv, user=BEN, home=host.homes[ANA])
        assert done.returncode in (1, 2) and "Traceback" not in done.stderr
        assert "Permission denied" in done.stderr, done.stderr
    # ... nor with SQLite directly, nor in the witness's record of her heads.
    denied = as_user(BEN, "import sqlite3",
                     f"sqlite3.connect({str(log)!r}).execute('DELETE FROM events')")
    assert denied.returncode != 0 and "unable to open" in denied.stderr
    heads = host.witness / "heads" / f"{ANA}.jsonl"
    assert abhed("events", "witness", "collect", str(host.witness), user=SERVICE).returncode == 0
    assert heads.exists() and heads.stat().st_uid == SERVICE
    for uid in (ANA, BEN):
        tamper = as_user(uid, f"open({str(heads)!r}, 'a').write('x')")
        assert tamper.returncode != 0 and "Permission denied" in tamper.stderr
    assert sha(log) == before


def test_a_forged_drop_is_filed_under_the_uid_that_wrote_it(abhed: Cli, host: Host) -> None:
    drop = host.witness / "inbox" / f"{ANA}-1-forged.head"
    forged = json.dumps({"log": str(host.log(ANA)), "seq": 1, "hash": "f" * 64})
    assert as_user(BEN, f"open({str(drop)!r}, 'x').write({forged!r})").returncode == 0
    assert as_user(BEN, "import os", f"os.listdir({str(drop.parent)!r})").returncode != 0
    assert abhed("events", "witness", "collect", str(host.witness), user=SERVICE).returncode == 0
    assert not (host.witness / "heads" / f"{ANA}.jsonl").exists()
    assert json.loads((host.witness / "heads" / f"{BEN}.jsonl").read_text())["uid"] == BEN


def test_rewriting_ones_own_log_is_caught_by_the_witness(abhed: Cli, host: Host) -> None:
    home, ws = host.homes[ANA], str(host.workspaces[ANA])
    for _ in range(3):
        assert abhed("tool", "glob", '{"pattern": "*"}', "-w", ws, user=ANA, home=home).returncode == 0
    assert abhed("events", "witness", "collect", str(host.witness), user=SERVICE).returncode == 0
    ok = abhed("events", "verify", user=ANA, home=home)
    assert ok.returncode == 0 and "3 head(s) witnessed" in ok.stdout, ok.stdout + ok.stderr
    # Ana owns her file, so she can rewrite it: alter event 2 and rehash the whole chain.
    _rewrite_as(ANA, host.log(ANA), seq=2)
    plain = abhed("events", "verify", "--witness", str(host.witness / "nowhere"), user=ANA,
                  home=home)
    assert plain.returncode == 0  # on its own, a rehashed chain is consistent ...
    caught = abhed("events", "verify", user=ANA, home=home)
    assert caught.returncode == 1  # ... but not with the heads the service account holds
    assert "is not in the log" in caught.stderr and "rewritten" in caught.stderr


def test_new_work_is_refused_while_the_witness_cannot_take_a_head(abhed: Cli, host: Host) -> None:
    os.chmod(host.witness / "inbox", 0o755)  # misconfigured: engineers cannot drop
    done = abhed("tool", "glob", '{"pattern": "*"}', "-w", str(host.workspaces[ANA]), user=ANA,
                 home=host.homes[ANA])
    assert done.returncode == 1 and "witness inbox" in done.stderr


def _rewrite_as(uid: int, log: Path, seq: int) -> None:
    script = f"""
import json, sqlite3, sys
sys.path[:0] = {sys.path!r}
from appliance.events._schema import chain_hash
conn = sqlite3.connect({str(log)!r}, isolation_level=None)
conn.execute("DROP TRIGGER events_no_update")
rows = conn.execute("SELECT seq, session_id, session_seq, type, ts, body FROM events ORDER BY seq").fetchall()
prev = "0" * 64
for s, sid, sseq, type_, ts, body in rows:
    if s == {seq}:
        body = body.replace('"glob"', '"bash"')
    digest = chain_hash(s, sid, sseq, type_, ts, body, prev)
    conn.execute("UPDATE events SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?", (body, prev, digest, s))
    prev = digest
conn.execute("CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END")
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
"""
    done = as_user(uid, script)
    assert done.returncode == 0, done.stderr
