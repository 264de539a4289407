"""Copy to the clipboard, and say truthfully how (claude-code#93147: "copied" when nothing was).

OSC 52 asks the terminal to set the clipboard; nothing comes back to say it
did, so it is reported as *sent*, not as copied.  A clipboard tool (wl-copy,
xclip, xsel, pbcopy) that exits 0 did copy, and is reported as such.  Inside
tmux the OSC 52 sequence is wrapped for passthrough.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable

__all__ = ["copy_text", "osc52"]

_TOOLS: list[list[str]] = [["wl-copy"], ["xclip", "-selection", "clipboard"],
                           ["xsel", "--clipboard", "--input"], ["pbcopy"]]
MAX_OSC52_BYTES = 74_994  # the payload many terminals accept (xterm's default limit is 100,000)


def osc52(text: str, *, tmux: bool) -> str | None:
    """The OSC 52 sequence for ``text``, wrapped for tmux; None when too large to send."""
    payload = base64.b64encode(text.encode("utf-8")).decode("ascii")
    if len(payload) > MAX_OSC52_BYTES:
        return None
    seq = f"\x1b]52;c;{payload}\x07"
    if tmux:
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def copy_text(text: str, write: Callable[[str], None], *,
              env: dict[str, str] | None = None) -> str:
    """Copy ``text``; returns the sentence to show, which never claims more than happened."""
    env = dict(os.environ) if env is None else env
    done: list[str] = []
    seq = osc52(text, tmux=bool(env.get("TMUX")))
    if seq is not None:
        write(seq)
        done.append("sent to the terminal by OSC 52" + (" (through tmux)" if env.get("TMUX") else "")
                    + "; whether it reached the clipboard depends on the terminal")
    graphical = bool(env.get("WAYLAND_DISPLAY") or env.get("DISPLAY"))
    for cmd in _TOOLS:
        if shutil.which(cmd[0]) is None or (cmd[0] != "pbcopy" and not graphical):
            continue
        try:
            proc = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True, timeout=3,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0:
            done.insert(0, f"copied with {cmd[0]}")
            break
    if not done:
        return ("not copied: the text is too large for OSC 52 and no clipboard tool "
                "(wl-copy, xclip, xsel, pbcopy) worked here; use /export to write it to a file")
    return "; ".join(done)
