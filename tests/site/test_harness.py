"""The simulated site itself: hosts reach each other and nothing else, keep their own users
and files, and leave nothing behind, even when the test that built them is killed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.site.harness import Site, build_site, sweep_stale

pytestmark = pytest.mark.slow



def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    return {line.split(" ", 1)[0] for line in out.splitlines() if line}


def _owner_alive(name: str) -> bool:
    """Whether the test process that built the site ``name`` belongs to is still running."""
    pid = name.removeprefix("abhed-site-").split("-")[0]
    return name.startswith("abhed-site-") and pid.isdigit() and Path(f"/proc/{pid}").exists()


def test_hosts_are_isolated_and_closing_leaves_nothing(site: Site) -> None:
    model, eng1, eng2 = site.hosts["model-1"], site.hosts["eng-1"], site.hosts["eng-2"]
    assert eng1.run(["hostname"]).stdout.strip() == "eng-1"
    # Users are the host's own: ana exists on eng-1 only, and cannot enter bob's home.
    assert eng1.run(["id", "-un"], user="ana").stdout.strip() == "ana"
    assert eng2.run(["id", "ana"]).returncode != 0
    assert eng1.run(["ls", "/home/bob"], user="ana").returncode != 0
    # Files are the host's own: /tmp and /etc/abhed written on one are not on the other.
    eng1.run(["sh", "-c", "echo x > /tmp/only-here && echo y > /etc/abhed/only-here"])
    assert eng2.run(["cat", "/tmp/only-here"]).returncode != 0
    assert eng2.run(["cat", "/etc/abhed/only-here"]).returncode != 0
    assert not Path("/etc/abhed/only-here").exists()
    # The hosts reach each other by name, and nothing outside the site.
    server = site.service(model, [sys.executable, "-m", "http.server", "--bind", model.address,
                                  "8080", "--directory", "/srv"])
    assert server.stderr is not None
    got = eng2.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--retry", "20",
                    "--retry-connrefused", "--retry-delay", "1", "http://model-1:8080/"])
    assert got.stdout == "200", got.stderr
    site.stop(server)
    out = eng1.run([sys.executable, "-c", textwrap.dedent("""
        import socket
        try:
            socket.create_connection(("192.0.2.1", 80), timeout=3)
        except OSError as exc:
            print(exc.errno)
        """)])
    assert out.stdout.strip() == "101", out  # ENETUNREACH: the site has no route out


def test_a_site_whose_test_was_killed_is_swept() -> None:
    before = _netns()
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, signal
        from tests.site.harness import build_site
        site = build_site({"eng-9": ["zed"]})
        print(site.tag, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """)], stdout=subprocess.PIPE, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                  "PATH": "/usr/sbin:/usr/bin:/bin"})
    tag = child.communicate(timeout=120)[0].strip()
    assert tag and any(n.startswith(tag) for n in _netns())  # left behind by the kill
    swept = sweep_stale()
    assert any(n.startswith(tag) for n in swept)
    assert not any(n.startswith(tag) for n in _netns())
    # Nothing stale is left; what is new since belongs to a live test (a parallel worker's).
    assert [n for n in _netns() - before if not _owner_alive(n)] == []
    pid = tag.removeprefix("abhed-site-").split("-")[0]
    assert not list(Path("/var/tmp").glob(f"abhed-site-{pid}-*"))  # its folders too
    small = build_site({"eng-1": ["ana"]}, model_hosts=())
    names = {n for n in _netns() if n.startswith(small.tag)}
    assert len(names) == 2  # the switch and the one host
    small.close()
    assert not any(n.startswith(small.tag) for n in _netns())
