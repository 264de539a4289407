"""The TUI in a real terminal: bare `abhed` under tmux, driven by send-keys, read by capture-pane.

Covers what a headless Pilot cannot: a real tty (bare `abhed` opens the TUI),
the terminal's own handling of what the app writes (an OSC 52 sequence in a
file must not reach tmux's clipboard), Esc through a real escape delay,
typing while an approval waits (it goes to the message box), Shift+Tab as a
terminal sends it, resize, PgUp/Home/End/Ctrl+Home/Ctrl+End and Up as tmux
sends them, and quitting back to the shell with exit code 0 and the line
that says how to resume; all of it with Textual limited to the 16 standard
colours.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from models.scripted import ScriptedServer
from tests.helpers import wait_for
from tests.tui.helpers import write_config
from tui._approval import GUARD_S

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


class Tmux:
    def __init__(self, name: str) -> None:
        self.base = ["tmux", "-L", name, "-f", "/dev/null"]
        self.name = name

    def __call__(self, *args: str) -> str:
        proc = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=30,
                              check=False)
        return proc.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.name)

    def wait(self, text: str, timeout_s: float = 60) -> str:
        def seen() -> str:
            screen = self.screen()
            return screen if text in screen else ""
        try:
            return wait_for(seen, timeout_s, what=f"{text!r} on the screen")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n{self.screen()}") from None

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", self.name, *keys)


@pytest.fixture
def tmux(abhed_home: Path, workspace: Path) -> Iterator[tuple[Tmux, ScriptedServer]]:
    assert shutil.which("tmux"), "tmux is installed by scripts/setup (scripts/apt-packages.txt)"
    with ScriptedServer() as server:
        write_config(abhed_home, server.base_url)
        t = Tmux(f"abhed-test-{os.getpid()}")
        # A 16-colour terminal, as many SSH sessions into a plant are.
        env = (f"ABHED_HOME={shlex.quote(str(abhed_home))} PYTHONPATH={shlex.quote(str(ROOT))} "
               "TEXTUAL_COLOR_SYSTEM=standard TERM=screen")
        cmd = (f"cd {shlex.quote(str(workspace))} && {env} {shlex.quote(sys.executable)} -m "
               "cli; echo TUI-EXIT=$?; sleep 600")
        t("new-session", "-d", "-s", t.name, "-x", "100", "-y", "30", cmd)
        t("set-option", "-g", "set-clipboard", "on")
        t("set-option", "-g", "escape-time", "50")
        try:
            yield t, server
        finally:
            t("kill-server")


def test_bare_abhed_in_tmux_prompt_approval_interrupt_resize_quit(
        tmux: tuple[Tmux, ScriptedServer], workspace: Path) -> None:
    t, server = tmux
    secret = base64.b64encode(b"PWNED-BY-FILE").decode()
    (workspace / "notes.txt").write_text(f"hello \x1b]52;c;{secret}\x07 world\n")
    server.add({"tool_calls": [{"name": "read", "arguments": {"path": str(workspace / "notes.txt")}}]},
               {"text": "The file says **hello world**."},
               {"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build",
                                                              "description": "clean"}}]},
               {"text": "cleaned"},
               {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30",
                                                              "description": "wait"}}]},
               {"text": "never reached"})
    t.wait("lists the keys")
    t.keys("what is in notes.txt?", "Enter")
    screen = t.wait("The file says hello world.")
    assert "␛]52;c;" in screen  # shown as text ...
    assert "PWNED" not in t("show-buffer")  # ... and never acted on

    (workspace / "build").mkdir()
    t.keys("clean up", "Enter")
    t.wait("[y] allow once")
    t.keys("why")  # typing while the card is open goes to the message box, never to the card
    assert "cleaned" not in t.wait("why") and (workspace / "build").exists()
    assert "waiting for your approval" in t.screen()  # the call's card: not "running"
    t.keys("BTab")  # Shift+Tab: to the card, whose keys answer
    t.wait("Tab: back to typing")
    time.sleep(GUARD_S + 0.2)  # keys count once the card has been up for the guard's time
    t.keys("y")
    t.wait("cleaned")
    t.keys("C-c")  # clear "why" from the message box
    assert not (workspace / "build").exists()

    t.keys("wait a bit", "Enter")
    t.wait("running bash")
    t.keys("Escape")
    t.wait("interrupted", timeout_s=30)
    assert "TUI-EXIT" not in t.screen()  # Esc never quits

    t("resize-window", "-t", t.name, "-x", "80", "-y", "24")
    screen = t.wait("idle")
    lines = screen.splitlines()
    assert any("idle" in ln for ln in lines[-3:]), screen  # the status line is still at the bottom
    assert screen.count("› wait a bit") <= 1  # nothing duplicated by the resize

    # a real terminal's paging keys over a conversation taller than the screen
    t.keys("one more", "Enter")  # takes the interrupted run's unused reply
    t.wait("never reached")
    for i in range(8):
        server.add({"text": f"answer {i}\n\nand a second paragraph {i}"})
    for i in range(8):
        t.keys(f"question {i}", "Enter")
        t.wait(f"second paragraph {i}")

    def first_prompt() -> str:
        shown = [ln.split("›", 1)[1].strip() for ln in t.screen().splitlines() if "›" in ln]
        return shown[0] if shown else ""

    bottom = first_prompt()
    t.keys("PPage")
    wait_for(lambda: first_prompt() != bottom, 10, what="PgUp to scroll")
    t.keys("Home")
    wait_for(lambda: first_prompt() == "what is in notes.txt?", 10, what="Home: the top")
    t.keys("End")
    wait_for(lambda: first_prompt() == bottom, 10, what="End: the newest output")
    t.keys("C-Home")
    wait_for(lambda: first_prompt() == "what is in notes.txt?", 10, what="Ctrl+Home")
    t.keys("C-End")
    wait_for(lambda: first_prompt() == bottom, 10, what="Ctrl+End")
    t.keys("Up")  # the last prompt back, to edit and send again
    wait_for(lambda: "│ question 7" in t.screen(), 10, what="Up to recall the last prompt")
    t.keys("C-c")

    t.keys("C-d")
    screen = t.wait("TUI-EXIT=0", timeout_s=30)
    assert "Continue it with: abhed tui --session s-" in screen.replace("\n", "")
    assert "PWNED" not in t("show-buffer")  # the file's OSC 52 never reached the clipboard
