"""Make model text and tool output safe to put on a terminal, and bounded.

Anything the model writes or a tool returns may hold terminal control
sequences: ``ESC ] 52 ;`` sets the clipboard, ``ESC [ 2 J`` clears the
screen, a bare CR overwrites a line.  Rich strips only a few of them (BEL,
BS, VT, FF, CR) and lets ESC through, so every string from outside is passed
through :func:`visible` first: each C0/C1 control other than newline and tab
becomes a visible Unicode control picture (``␛`` for ESC), so the person sees
that it was there and the terminal never acts on it.

Sizes are bounded too: a 1 MB single-line result must not become a 1 MB
widget.  :func:`clip_lines` keeps a head of lines, each cut to a width, and
says how much it left out.
"""

from __future__ import annotations

import re

__all__ = ["clip_lines", "visible"]

# C0 controls except \t and \n, DEL, C1 controls, and lone surrogates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\ud800-\udfff]")
_PICTURE = {0x7F: "\u2421"}


def _picture(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400.. CONTROL PICTURES: ␀ ␁ … ␛ …
    if code in _PICTURE:
        return _PICTURE[code]
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"\\x{code:02x}"


def visible(text: str) -> str:
    """``text`` with every control character (but newline and tab) shown as a visible symbol."""
    if text.isascii() and text.isprintable():
        return text
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(_picture, text).expandtabs(4)


def clip_lines(text: str, *, max_lines: int, max_width: int = 400) -> tuple[str, int, int]:
    """The first ``max_lines`` lines of ``text``, each cut at ``max_width`` characters.

    Returns ``(clipped, lines_left_out, lines_cut)`` so a caller can say what it left out.
    Never scans more of ``text`` than it needs: a single 1 MB line costs one slice.
    """
    out: list[str] = []
    cut = 0
    start = 0
    n = len(text)
    while start <= n and len(out) < max_lines:
        end = text.find("\n", start)
        if end < 0:
            end = n
        line = text[start:min(end, start + max_width + 1)]
        if end - start > max_width:
            line = line[:max_width] + f"… (+{end - start - max_width:,} chars)"
            cut += 1
        out.append(line)
        start = end + 1
    left = text.count("\n", start) + 1 if start <= n else 0
    if text.endswith("\n") and left:
        left -= 1
    if out and out[-1] == "" and start > n:
        out.pop()
    return visible("\n".join(out)), left, cut
