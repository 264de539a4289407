"""Commands that always ask, in every mode, whatever the allow rules say.

Each check looks at one parsed :class:`SimpleCommand` (quotes undone,
wrappers such as ``sudo`` or ``xargs`` stripped and remembered) and returns a
short label naming the pattern, or ``None``.  The label is what the approval
prompt and the event log show, so a reviewer can see *why* a command asked.
"""

from __future__ import annotations

import re

from tools.shell import Parsed, SimpleCommand

__all__ = ["destructive_reasons"]

_BLOCK_DEVICE = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|dm-\d|md\d|loop\d|disk/|mapper/|sr\d)")
# Paths too broad for a recursive chmod/chown: the root, a top-level directory,
# home, the current or parent directory, or anything computed or globbed.
_BROAD = re.compile(r"^(/+|/[^/]+/?|/\*|~/?|~/\*|\$HOME/?|\$\{HOME\}/?|\.{1,2}/?|\*|\.{1,2}/\*)$")
_WIPERS = {"shred", "wipefs", "mkswap", "fdisk", "sfdisk", "parted", "sgdisk", "blkdiscard"}


def _short_flags(args: list[str]) -> set[str]:
    flags: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("--"):
            flags.add(a)
        elif a.startswith("-") and len(a) > 1:
            flags.update("-" + ch for ch in a[1:])
    return flags


def _rm(cmd: SimpleCommand) -> str | None:
    f = _short_flags(cmd.args)
    recursive = bool(f & {"-r", "-R", "--recursive"})
    force = bool(f & {"-f", "--force"})
    if recursive and force:
        return "rm -rf (recursive forced delete)"
    if cmd.dynamic_args and (recursive or force or any(a.startswith("$") for a in cmd.args)):
        return "rm with options or targets computed at run time"
    return None


def _git(cmd: SimpleCommand) -> str | None:
    sub = cmd.subcommand
    rest = cmd.args[cmd.args.index(sub) + 1:] if sub in cmd.args else []
    f = _short_flags(rest)
    if sub == "push" and (f & {"-f", "--force", "--force-with-lease", "--force-if-includes",
                               "--mirror", "--delete", "-d"}
                          or any(a.startswith(("+", "--force")) for a in rest)):
        return "git push --force (rewrites or deletes remote history)"
    if sub == "reset" and "--hard" in rest:
        return "git reset --hard (discards uncommitted work)"
    if sub == "clean" and f & {"-f", "--force"}:
        return "git clean -f (deletes untracked files)"
    if sub in ("checkout", "restore") and ("." in rest or "--" in rest and rest[-1:] == ["."]):
        return f"git {sub} . (discards uncommitted changes)"
    if sub == "branch" and "-D" in f:
        return "git branch -D (deletes an unmerged branch)"
    return None


def _recursive_owner(cmd: SimpleCommand) -> str | None:
    f = _short_flags(cmd.args)
    if not f & {"-R", "--recursive"}:
        return None
    targets = [a for a in cmd.args if not a.startswith("-")][1:]  # first is the mode/owner
    broad = [t for t in targets if _BROAD.match(t) or t.startswith("$")]
    if broad or cmd.dynamic_args or not targets:
        return f"{cmd.program_name} -R on a broad path ({', '.join(broad) or 'computed'})"
    return None


def _one(cmd: SimpleCommand) -> list[str]:
    found: list[str] = []
    if "sudo" in cmd.wrappers or "doas" in cmd.wrappers:
        found.append("sudo (runs as another user)")
    name = cmd.program_name
    if name in ("sudo", "doas", "su", "pkexec"):
        found.append(f"{name} (runs as another user)")
    if name == "rm":
        label = _rm(cmd)
        if label:
            found.append(label)
    elif name == "dd":
        found.append("dd (raw block copy)")
    elif name is not None and (name.startswith("mkfs") or name in _WIPERS):
        found.append(f"{name} (formats or wipes a device)")
    elif name == "git":
        label = _git(cmd)
        if label:
            found.append(label)
    elif name in ("chmod", "chown", "chgrp"):
        label = _recursive_owner(cmd)
        if label:
            found.append(label)
    elif name == "find" and ("-delete" in cmd.args or any(
            a in ("-exec", "-execdir", "-ok") and i + 1 < len(cmd.args)
            and cmd.args[i + 1].rsplit("/", 1)[-1] in ("rm", "shred") for i, a in enumerate(cmd.args))):
        found.append("find -delete / -exec rm (deletes what it finds)")
    for target in cmd.redirects + cmd.args:
        target = target.split("=", 1)[1] if target.startswith("of=") else target
        if _BLOCK_DEVICE.match(target):
            found.append(f"writes to block device {target}")
            break
    return found


def destructive_reasons(parsed: Parsed, raw: str) -> list[str]:
    """Labels of every destructive pattern in a parsed command line (empty: none)."""
    reasons: list[str] = []
    # A function that pipes into itself (the classic :(){ :|:& };:) multiplies without end.
    if any(re.search(rf"{re.escape(f)}\s*\|\s*{re.escape(f)}", raw) for f in parsed.functions):
        reasons.append("fork bomb (a function that spawns itself without end)")
    for cmd in parsed.commands:
        for r in _one(cmd):
            if r not in reasons:
                reasons.append(r)
    return reasons
