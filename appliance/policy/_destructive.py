"""Commands that always ask, in every mode, whatever the allow rules say.

Each check looks at one parsed :class:`SimpleCommand` (quotes undone,
wrappers such as ``sudo`` or ``xargs`` stripped and remembered, and reached
by whatever route: ``bash -lc '...'``, ``find -exec``, a git alias) and
returns a short label naming the pattern, or ``None``.  The label, with the
route when there is one, is what the approval prompt and the event log show,
so a reviewer can see *why* a command asked and how it would have run.

Commands that only read are left alone even when they name something
dangerous (``stat /dev/sda``, ``mkfs.ext4 --help``, ``fdisk -l``): asking
about them would teach people to approve without reading.
"""

from __future__ import annotations

import re

from tools.shell_parser import Parsed, SimpleCommand, abbreviates

__all__ = ["destructive_reasons"]

_BLOCK_DEVICE = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|dm-\d|md\d|loop\d|disk/|mapper/|sr\d)")
# Paths too broad for a recursive chmod/chown: the root, a top-level directory,
# home, the current or parent directory, or anything computed or globbed.
_BROAD = re.compile(r"^(/+|/[^/]+/?|/\*|~/?|~/\*|\$HOME/?|\$\{HOME\}/?|\.{1,2}/?|\*|\.{1,2}/\*)$")
_WIPERS = {"shred", "wipefs", "mkswap", "fdisk", "cfdisk", "sfdisk", "parted", "sgdisk", "gdisk",
           "blkdiscard"}
# Programs that only read what they are given, so naming a device is no write to it.
_READS_DEVICES = {"stat", "ls", "file", "lsblk", "blkid", "readlink", "realpath", "test", "[", "[[",
                  "udevadm", "hexdump", "xxd", "od", "head", "tail", "cat", "strings", "cmp",
                  "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum",
                  "cksum", "dumpe2fs", "findmnt", "df", "du", "wc", "grep", "rg", "echo", "printf",
                  "smartctl", "lsof", "fuser", "tune2fs -l"}
_HELP_ONLY = {"--help", "-h", "--version", "-V", "--usage"}
# Options with which a partitioning or wiping tool only lists.
_LIST_MODE = {
    "fdisk": {"-l", "--list", "-x", "--list-details"},
    "sfdisk": {"-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-V", "--verify",
               "-g", "--show-geometry", "--list-types", "-T"},
    "sgdisk": {"-p", "--print", "-v", "--verify", "-i", "--info", "-P", "--pretend", "-L",
               "--list-types"},
    "parted": {"-l", "--list"},
}


def _short_flags(args: list[str]) -> set[str]:
    """The options written before ``--``: each letter of a cluster, each long name as written."""
    flags: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("--"):
            flags.add(a.partition("=")[0])
        elif a.startswith("-") and len(a) > 1:
            flags.update("-" + ch for ch in a[1:])
    return flags


def _has(flags: set[str], *spellings: str) -> bool:
    """Whether ``flags`` hold one of ``spellings``: a short one as is, a long one in any spelling
    the program takes (``rm --rec``, ``git reset --ha``: getopt_long and git accept a prefix)."""
    return any(f in spellings or any(o.startswith("--") and abbreviates(f, o) for o in spellings)
               for f in flags)


def _only_help(cmd: SimpleCommand) -> bool:
    return bool(cmd.args) and all(a in _HELP_ONLY for a in cmd.args)


def _rm(cmd: SimpleCommand) -> str | None:
    if _only_help(cmd):
        return None
    f = _short_flags(cmd.args)
    recursive = _has(f, "-r", "-R", "--recursive")
    force = _has(f, "-f", "--force")
    if recursive and force:
        return "rm -rf (recursive forced delete)"
    if recursive:
        return ("rm -r (recursive delete: with no terminal to prompt on, a whole tree goes "
                "without a question)")
    if cmd.computed_operands:
        return "rm of paths computed at run time (each file found or read is deleted)"
    if cmd.dynamic_args and (force or any(a.startswith("$") for a in cmd.args)):
        return "rm with options or targets computed at run time"
    if force:
        # Decided again in issue 33 (docs/policy.md gives the reason): -f is how a delete says
        # "do not stop me", and bash's deletes are outside what an undo puts back.
        return ("rm -f (forced delete: a write-protected file goes without a question and a "
                "missing one without a word)")
    return None


def _git_config(args: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, a in enumerate(args[:-1]):
        if a == "-c":
            key, _, value = args[i + 1].partition("=")
            out[key.lower()] = value.lower()
    return out


def _git(cmd: SimpleCommand) -> str | None:
    sub = cmd.subcommand
    rest = cmd.args[cmd.args.index(sub) + 1:] if sub in cmd.args else []
    f = _short_flags(rest)
    if sub == "push" and not _has(f, "-n", "--dry-run") and (
            _has(f, "-f", "--force", "--force-with-lease", "--force-if-includes", "--mirror",
                 "--delete", "-d") or any(a.startswith("+") or _deletes_ref(a) for a in rest)):
        return "git push --force (rewrites or deletes remote history)"
    if sub == "reset" and _has(f, "--hard"):
        return "git reset --hard (discards uncommitted work)"
    if sub == "clean" and not _has(f, "-n", "--dry-run", "-i", "--interactive") and (
            _has(f, "-f", "--force")
            or _git_config(cmd.args).get("clean.requireforce") in ("false", "no", "off", "0")):
        return "git clean -f (deletes untracked files)"
    if sub in ("checkout", "restore") and ("." in rest or "--" in rest and rest[-1:] == ["."]):
        return f"git {sub} . (discards uncommitted changes)"
    if sub in ("checkout", "switch") and _has(f, "-f", "--force", "--discard-changes"):
        return f"git {sub} --force (discards uncommitted changes)"
    if sub == "branch" and (_has(f, "-D") or _has(f, "-d", "--delete") and _has(f, "-f", "--force")):
        return "git branch -D (deletes an unmerged branch)"
    return None


def _deletes_ref(arg: str) -> bool:
    """A push refspec with nothing before the colon (``:main``) deletes the remote ref."""
    return arg.startswith(":") and len(arg) > 1


def _recursive_owner(cmd: SimpleCommand) -> str | None:
    f = _short_flags(cmd.args)
    if not _has(f, "-R", "--recursive"):
        return None
    targets = [a for a in cmd.args if not a.startswith("-")][1:]  # first is the mode/owner
    broad = [t for t in targets if _BROAD.match(t) or t.startswith("$")]
    if broad or cmd.dynamic_args or not targets:
        return f"{cmd.program_name} -R on a broad path ({', '.join(broad) or 'computed'})"
    return None


def _wiper(name: str, cmd: SimpleCommand) -> str | None:
    if _only_help(cmd) or not cmd.args and name != "blkdiscard":
        return None
    flags = set(cmd.args)
    if name in _LIST_MODE and flags & _LIST_MODE[name]:
        return None
    if name == "wipefs" and not flags & {"-a", "--all", "-o", "--offset"} \
            or name == "wipefs" and flags & {"-n", "--no-act"}:
        return None  # wipefs with no -a or -o only lists signatures
    if name == "parted" and {"print", "p"} & flags and not flags & {"mklabel", "mkpart", "rm",
                                                                     "resizepart", "mkfs"}:
        return None
    return f"{name} (formats or wipes a device)"


def _dd(cmd: SimpleCommand) -> str | None:
    for a, dyn in zip(cmd.args, cmd.arg_dynamic or [False] * len(cmd.args), strict=False):
        if a.startswith("of=") and (dyn or _BLOCK_DEVICE.match(a[3:])):
            return "dd writing to a device or a target computed at run time"
    return None


def _one(cmd: SimpleCommand) -> list[str]:
    found: list[str] = []
    for w in ("sudo", "doas", "pkexec", "su", "runuser"):
        if w in cmd.wrappers:
            found.append(f"{w} (runs as another user)")
    name = cmd.program_name
    if name in ("sudo", "doas", "su", "pkexec", "runuser"):
        found.append(f"{name} (runs as another user)")
    if name == "rm":
        label = _rm(cmd)
        if label:
            found.append(label)
    elif name == "rimraf" and not _only_help(cmd):
        found.append("rimraf (recursive forced delete)")
    elif name == "dd":
        label = _dd(cmd)
        if label:
            found.append(label)
    elif name is not None and (name.startswith("mkfs") or name in _WIPERS):
        label = _wiper(name, cmd)
        if label is None:
            return found  # a listing: reads the device it names
        found.append(label)
    elif name == "git":
        label = _git(cmd)
        if label:
            found.append(label)
    elif name in ("chmod", "chown", "chgrp"):
        label = _recursive_owner(cmd)
        if label:
            found.append(label)
    elif name == "find" and "-delete" in cmd.args:
        found.append("find -delete (deletes what it finds)")
    found += _devices(cmd, name)
    return found


def _devices(cmd: SimpleCommand, name: str | None) -> list[str]:
    """A write to a block device: by redirection always, by argument unless the program only reads."""
    for target in cmd.writes:
        if _BLOCK_DEVICE.match(target):
            return [f"writes to block device {target}"]
    if name in _READS_DEVICES or name == "dd" or _only_help(cmd):
        return []
    if name in _LIST_MODE and set(cmd.args) & _LIST_MODE[name]:
        return []
    for target in cmd.args:
        target = target.split("=", 1)[1] if target.startswith("of=") else target
        if _BLOCK_DEVICE.match(target):
            return [f"names block device {target} (a program that may write it)"]
    return []


def destructive_reasons(parsed: Parsed, raw: str) -> list[str]:
    """Labels of every destructive pattern in a parsed command line (empty: none).

    A command reached by a route carries it: ``rm -rf (recursive forced
    delete) -- runs the script of bash -lc: rm -rf $HOME``.
    """
    reasons: list[str] = []
    # A function that pipes into itself (the classic :(){ :|:& };:) multiplies without end.
    if any(re.search(rf"{re.escape(f)}\s*\|\s*{re.escape(f)}", raw) for f in parsed.functions):
        reasons.append("fork bomb (a function that spawns itself without end)")
    for cmd in parsed.commands:
        for r in _one(cmd):
            label = f"{r} -- {cmd.where}" if cmd.route else r
            if label not in reasons:
                reasons.append(label)
    return reasons
