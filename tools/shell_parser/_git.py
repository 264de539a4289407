"""The ways git runs a command: settings (``-c core.pager=...``, ``!`` aliases, ``GIT_*``
variables), options of some subcommands (``rebase --exec``, ``bisect run``, ``submodule
foreach``, ``--upload-pack``), and the ``ext::`` transport.
"""

from __future__ import annotations

import re

from tools.shell_parser._ctx import Ctx
from tools.shell_parser._model import Word
from tools.shell_parser._options import Scan, option_values, scan_with

# Settings whose value git runs as shell text (through ``sh -c`` when it has metacharacters).
_SHELL_KEYS = re.compile(r"""^(
    core\.(pager|editor|sshcommand|askpass|fsmonitor|gitproxy|alternaterefscommand)
  | sequence\.editor | diff\.external | interactive\.difffilter | web\.browser
  | uploadpack\.packobjectshook | gpg(\..+)?\.program | instaweb\.httpd
  | diff\..+\.(command|textconv) | difftool\..+\.(cmd|path) | mergetool\..+\.(cmd|path)
  | merge\..+\.driver | filter\..+\.(clean|smudge|process) | pager\..+
  | credential(\..+)?\.helper | remote\..+\.(uploadpack|receivepack|proxy)
  | browser\..+\.(cmd|path) | man\..+\.(cmd|path) | trailer\..+\.(command|cmd)
  | sendemail(\..+)?\.(smtpserver|tocmd|cccmd|sendmailcmd)
  | submodule\..+\.update | alias\..+
)$""", re.VERBOSE)
_BOOLEAN = {"true", "false", "yes", "no", "on", "off", "1", "0", ""}
# Global options of git that take the next word as their value.
_GLOBAL_VALUES = {"-C", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--super-prefix",
                  "--config-env", "--list-cmds", "--attr-source"}
_COMMAND_OPTS = {
    "rebase": ("-x", "--exec"), "difftool": ("-x", "--extcmd"),
    "fetch": ("--upload-pack",), "pull": ("--upload-pack",), "clone": ("-u", "--upload-pack"),
    "ls-remote": ("--upload-pack",), "fetch-pack": ("--upload-pack",),
    "push": ("--receive-pack", "--exec"), "send-pack": ("--receive-pack", "--exec"),
    "archive": ("--exec",), "send-email": ("--to-cmd", "--cc-cmd", "--sendmail-cmd",
                                           "--smtp-server"),
    "filter-branch": ("--setup", "--env-filter", "--tree-filter", "--index-filter",
                      "--parent-filter", "--msg-filter", "--commit-filter", "--tag-name-filter"),
}


def config_pairs_from_env(assigns: list[Word]) -> list[tuple[str, Word]]:
    """Settings passed in the environment: ``GIT_CONFIG_PARAMETERS`` and ``GIT_CONFIG_KEY_n``."""
    pairs: list[tuple[str, Word]] = []
    keys: dict[str, str] = {}
    values: dict[str, Word] = {}
    for a in assigns:
        name, _, value = a.text.partition("=")
        if name == "GIT_CONFIG_PARAMETERS":
            for k, v in re.findall(r"'((?:[^'\\]|\\.)*)'(?:=('(?:[^'\\]|\\.)*'))?", value):
                pairs.append((k, _value_word(a, v[1:-1] if v else "")))
        elif name.startswith("GIT_CONFIG_KEY_"):
            keys[name[len("GIT_CONFIG_KEY_"):]] = value
        elif name.startswith("GIT_CONFIG_VALUE_"):
            values[name[len("GIT_CONFIG_VALUE_"):]] = _value_word(a, value)
    for n, key in keys.items():
        if n in values:
            pairs.append((key, values[n]))
    return pairs


def _value_word(whole: Word, value: str) -> Word:
    return Word(value, value, ("x" if whole.dynamic else "q") * len(value))


def judge_setting(key: str, value: Word, ctx: Ctx, how: str) -> None:
    """Judge one git setting's value when git would run it (``how`` names where it was set)."""
    k = key.lower()
    if not _SHELL_KEYS.match(k):
        return
    text = value.text
    label = f"the value of {key} ({how})"
    if k.startswith("alias."):
        if text.startswith("!"):
            ctx.script(_tail(value, 1), label)
        return  # a plain alias is git arguments: judged where it is used
    if (k.startswith(("pager.", "core.fsmonitor")) and text.lower() in _BOOLEAN) or not text:
        return
    if k.startswith(("credential", "submodule.")):
        if not text.startswith("!"):
            return  # a credential helper name, or checkout/rebase/merge/none
        value = _tail(value, 1)
    ctx.script(value, label)


def _tail(w: Word, n: int) -> Word:
    return Word(w.text[n:], w.raw, w.mask[n:], w.quoted, w.procsub)


def git_routes(words: list[Word], assigns: list[Word], ctx: Ctx) -> None:
    """Judge what ``git ...`` runs besides git: settings, aliases, and command-running options."""
    config = [(k, v, "the environment") for k, v in config_pairs_from_env(assigns)]

    def read(ws: list[Word], i: int, _out: Scan) -> int:
        t = ws[i].text
        if t == "-c" and i + 1 < len(ws):
            key, _, _ = ws[i + 1].text.partition("=")
            config.append((key, _tail(ws[i + 1], len(key) + 1), "git -c"))
            return 2
        if t.startswith("--config-env"):
            spec = t.partition("=")[2] if "=" in t else (ws[i + 1].text if i + 1 < len(ws) else "")
            key = spec.partition("=")[0]
            if _SHELL_KEYS.match(key.lower()):
                ctx.out.add_unparseable(f"git --config-env sets {key} from an environment variable, "
                                        "so policy cannot see the command it runs")
            return 1 if "=" in t else 2
        return 2 if t in _GLOBAL_VALUES else 1

    # git's global options end where every program's do (git refuses a bare - or --)
    scan = scan_with(words, 1, read)
    for key, value, how in config:
        if how == "git -c":  # settings from the environment were judged where they were set
            judge_setting(key, value, ctx, how)
    if scan.unknown is not None:
        ctx.out.add_unparseable(f"git's option {scan.unknown!r} is computed at run time, so policy "
                                "cannot tell whether it sets a command to run (-c)")
        return
    i = scan.operand
    if i >= len(words):
        return
    sub, rest = words[i].text, words[i + 1:]
    aliases = {k.lower()[len("alias."):]: v for k, v, _ in config if k.lower().startswith("alias.")}
    alias = aliases.get(sub.lower()) if not words[i].dynamic else None
    if alias is not None and not alias.text.startswith("!"):
        if alias.dynamic:
            ctx.out.add_unparseable(f"the git alias {sub} is computed at run time")
            return
        expanded = [*words[:i], *(Word.literal(x) for x in alias.text.split()), *rest]
        ctx.command(expanded, f"the git alias {sub}")
        return
    for w in rest:
        if "ext::" in w.text:
            ctx.opaque("git's ext:: transport (runs the command in the URL)", w.text)
    _subcommand(sub, rest, ctx)


def _subcommand(sub: str, rest: list[Word], ctx: Ctx) -> None:
    if sub == "bisect" and rest[:1] and rest[0].text == "run":
        ctx.command(rest[1:], "the command of git bisect run")
        return
    if sub == "submodule":
        names = [w.text for w in rest]
        if "foreach" in names:
            cmd = [w for w in rest[names.index("foreach") + 1:] if not w.text.startswith("--")]
            if cmd:
                joined = " ".join(w.text for w in cmd)
                dyn = any(w.dynamic for w in cmd)
                ctx.script(Word(joined, joined, ("x" if dyn else "q") * len(joined)),
                           "the command of git submodule foreach")
        return
    if sub == "config":
        _config(rest, ctx)
        return
    if sub == "grep":
        for w in rest:
            t = w.text
            if t.startswith("--open-files-in-pager=") or (t.startswith("-O") and len(t) > 2):
                value = t.partition("=")[2] if t.startswith("--") else t[2:]
                ctx.script(Word(value, value, w.mask[len(t) - len(value):]), "the pager of git grep -O")
        return
    options: tuple[str, ...] = _COMMAND_OPTS.get(sub, ())
    # git reads a long option cut short as the one it begins (rebase --exe): every spelling.
    for option, given in option_values([Word.literal(sub), *rest], options):
        _run_option(sub, option, given, ctx)


def _run_option(sub: str, opt: str, value: Word, ctx: Ctx) -> None:
    label = f"the command of git {sub} {opt}"
    if opt == "--smtp-server":
        if value.text.startswith("/"):
            ctx.command([value], label)
        return
    ctx.script(value, label)


def _config(rest: list[Word], ctx: Ctx) -> None:
    """``git config [--global] KEY VALUE`` (and ``git config set KEY VALUE``) stores code to run later."""
    operands: list[Word] = []
    k = 0
    while k < len(rest):
        t = rest[k].text
        if t in ("-f", "--file", "--blob", "--type", "--default", "--comment", "--value"):
            k += 2
            continue
        if t.startswith("-"):
            if t in ("--unset", "--unset-all", "--get", "--get-all", "--get-regexp", "--list", "-l",
                     "--remove-section", "--rename-section", "-e", "--edit", "--get-urlmatch"):
                return
            k += 1
            continue
        operands.append(rest[k])
        k += 1
    if operands[:1] and operands[0].text in ("set", "unset", "get", "list", "edit",
                                             "rename-section", "remove-section"):
        if operands[0].text != "set":
            return
        operands = operands[1:]
    if len(operands) >= 2:
        judge_setting(operands[0].text, operands[1], ctx, "stored by git config")
