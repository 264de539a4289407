"""Variables whose value a program later runs as code (``GIT_PAGER``, ``PROMPT_COMMAND``, ...).

An assignment can plant code for a later command: ``GIT_PAGER='rm -rf .' git
log`` runs ``rm -rf .`` when git pages.  Wherever a variable is set (before a
command, through ``env``, ``export`` or ``declare``), a value the shell or a
program will run is judged as the code it is.
"""

from __future__ import annotations

import re

from tools.shell_parser._ctx import Ctx
from tools.shell_parser._git import config_pairs_from_env, judge_setting
from tools.shell_parser._lexer import Lexer
from tools.shell_parser._model import Word

# Run as shell text by the programs that read them.
_SHELL_VARS = {"GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND",
               "GIT_PROXY_COMMAND", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL",
               "SUDO_EDITOR", "FCEDIT", "LESSOPEN", "LESSCLOSE", "BROWSER", "PROMPT_COMMAND"}
# Run as a program (a path, no arguments).
_PROGRAM_VARS = {"GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "GIT_EXTERNAL_DIFF"}
# Expanded later by the shell itself, command substitutions included: the prompts, and the
# start-up file names bash (BASH_ENV, every non-interactive bash) and sh (ENV) expand
# before they read the file (``BASH_ENV='$(rm -rf ~)' bash -c true`` runs the rm).
_EXPANDED_VARS = {"PS0", "PS1", "PS2", "PS3", "PS4", "BASH_ENV", "ENV"}
_MAKE_VARS = {"MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS"}
_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")


def check_assignments(words: list[Word], ctx: Ctx) -> None:
    """Judge every ``NAME=VALUE`` in ``words``, and the git settings they pass together."""
    for w in words:
        check_assignment(w, ctx)
    git = [w for w in words if w.text.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))]
    for key, v in config_pairs_from_env(git):
        judge_setting(key, v, ctx, "set in GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n")


def check_assignment(word: Word, ctx: Ctx) -> None:
    """Judge ``NAME=VALUE`` when the value is code some program will run."""
    m = _NAME.match(word.text)
    if m is None:
        return
    name = m.group(1)
    off = m.end()
    value = Word(word.text[off:], word.raw, word.mask[off:], word.quoted, word.procsub)
    label = f"the value of {name}"
    if name in _SHELL_VARS:
        if name in ("LESSOPEN", "LESSCLOSE"):
            stripped = value.text.lstrip("|-")
            value = Word(stripped, value.raw, value.mask[len(value.text) - len(stripped):])
        if value.text:
            ctx.script(value, label)
    elif name in _PROGRAM_VARS:
        if value.text:
            ctx.command([value], label)
    elif name in _EXPANDED_VARS:
        Lexer(value.text, lambda inner: ctx.script(inner, label)).scan_expansions(value.text)
    elif name in _MAKE_VARS and "eval" in value.text:
        ctx.opaque(f"make code in {name} (--eval runs make code)", value.text)
    elif name == "GIT_CONFIG_PARAMETERS":
        for key, v in config_pairs_from_env([word]):
            judge_setting(key, v, ctx, "set in GIT_CONFIG_PARAMETERS")
