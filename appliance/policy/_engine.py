"""The decision: deny -> plan-mode refusal -> ask (destructive, unreadable, opaque) -> allow -> mode.

The engine is pure: given a tool, its *normalized* arguments and the rules,
it returns a :class:`Decision` naming the rule (or mode, or pattern) that made
it.  It runs nothing and records nothing, which is what lets
``abhed policy explain`` show exactly the decision a real call would get.
Extensions are consulted before the engine (by the gate) and can only make
its answer stricter.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from appliance.policy._destructive import destructive_reasons
from appliance.policy._settings import Mode, PolicySettings, Rule
from tools import Tool
from tools.pathpattern import PathPattern, escape
from tools.shell_parser import Parsed, SimpleCommand, split_command

__all__ = ["Decision", "PolicyEngine", "Verdict", "path_fields"]

Verdict = Literal["allow", "ask", "deny"]
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class Decision:
    """What policy says about one call, and who said it.

    ``decided_by`` names the source: ``deny[2]`` (the third deny rule),
    ``session-allow[0]``, ``destructive``, ``unparseable``, ``opaque`` (code
    in another language, or from a pipe, that policy cannot judge), ``mode:ask``,
    ``capability``, ``extension:NAME``.  ``commands`` lists the bash commands
    that need an answer; ``always`` holds the rules an "always allow" answer
    would store (empty when that answer is not offered).
    """

    verdict: Verdict
    decided_by: str
    reason: str
    commands: tuple[str, ...] = ()
    always: tuple[Rule, ...] = ()

    def stricter(self, other: Decision) -> Decision:
        return other if _STRICTNESS[other.verdict] > _STRICTNESS[self.verdict] else self


def path_fields(tool: Tool | type[Tool]) -> list[str]:
    """Argument names that hold filesystem paths (resolved before policy sees them).

    By name: ``path`` or ``*_path`` (the unset ``path_args`` hook is gone; no
    tool ever declared one).
    """
    model = getattr(tool, "args_model", None)
    fields = getattr(model, "model_fields", {}) if model is not None else {}
    return [n for n in fields if n == "path" or n.endswith("_path")]


@lru_cache(maxsize=512)
def _pattern(pattern: str) -> PathPattern:
    return PathPattern(pattern)


def _path_matches(pattern: str, path: str, root: str) -> bool:
    """Whether a rule's ``path`` pattern matches a resolved path, in the one dialect.

    Relative patterns are matched against the path relative to the workspace
    root (so ``*.pem`` is a name at any depth and ``src/*.py`` is anchored at
    the root); an absolute pattern inside the root is the same as its relative
    form anchored there, and one outside matches absolute paths.
    """
    inside = root.rstrip("/") + "/"
    if os.path.isabs(pattern):
        if pattern.startswith(inside):
            pattern = "/" + pattern[len(inside):]
        else:
            return _pattern(pattern).match(path)
    if not path.startswith(inside):
        return False
    return _pattern(pattern).match(path[len(inside):])


def _call_matches(rule: Rule, tool: str, args: Mapping[str, Any], paths: list[str], root: str) -> bool:
    if not fnmatch.fnmatchcase(tool, rule.tool):
        return False
    if rule.command is not None or rule.program is not None:
        return False  # bash-only fields never match a non-bash call
    if rule.path is not None:
        values = [args.get(p) for p in paths]
        if not any(isinstance(v, str) and _path_matches(rule.path, v, root) for v in values):
            return False
    for name, pattern in rule.args.items():
        value = args.get(name)
        if value is None or not fnmatch.fnmatchcase(value if isinstance(value, str) else str(value),
                                                    pattern):
            return False
    return True


def _command_matches(rule: Rule, cmd: SimpleCommand, args: Mapping[str, Any]) -> bool:
    if not fnmatch.fnmatchcase("bash", rule.tool) or rule.path is not None:
        return False
    if rule.program is not None and (cmd.dynamic_program or cmd.program != rule.program):
        return False
    if rule.subcommand is not None and cmd.subcommand != rule.subcommand:
        return False
    if rule.command is not None and not fnmatch.fnmatchcase(cmd.text, rule.command):
        return False
    for name, pattern in rule.args.items():
        value = args.get(name)
        if not isinstance(value, str) or not fnmatch.fnmatchcase(value, pattern):
            return False
    return True


# Programs whose first operand names one of their own commands (``git status``, ``docker
# run``, ``npm test``, ``make check``): an "always allow" for them names that subcommand.
SUBCOMMAND_PROGRAMS = frozenset({
    "git", "gh", "hg", "svn", "docker", "podman", "kubectl", "helm", "npm", "pnpm", "yarn",
    "bun", "deno", "cargo", "rustup", "go", "pip", "pip3", "pipx", "uv", "poetry", "pdm",
    "hatch", "conda", "mamba", "apt", "apt-get", "dnf", "yum", "brew", "systemctl",
    "journalctl", "make", "just", "cmake", "ctest", "dotnet", "mvn", "gradle", "terraform",
    "ansible-galaxy", "gem", "bundle", "composer", "mix", "stack", "cabal", "nix", "zig",
})


@dataclass
class _Call:
    tool: Tool
    args: Mapping[str, Any]
    root: str
    parsed: Parsed | None = None
    paths: list[str] = field(default_factory=list)

    @property
    def is_bash(self) -> bool:
        return self.parsed is not None


class PolicyEngine:
    """Operator rules plus the rules an approver added during the session.

    Args:
        settings: the ``policy`` config section.
        capabilities: the granted set; ``None`` grants everything.  Use
            :meth:`attenuated` for a subagent.
    """

    def __init__(self, settings: PolicySettings | None = None, *,
                 capabilities: Iterable[str] | None = None) -> None:
        self.settings = settings or PolicySettings()
        caps = capabilities if capabilities is not None else self.settings.capabilities
        self.capabilities: frozenset[str] | None = None if caps is None else frozenset(caps)
        self.session_allow: list[Rule] = []

    @property
    def mode(self) -> Mode:
        return self.settings.mode

    def attenuated(self, capabilities: Iterable[str], *, mode: Mode | None = None) -> PolicyEngine:
        """A copy for a subagent: at most the capabilities asked for *and* held here."""
        wanted = frozenset(capabilities)
        held = wanted if self.capabilities is None else wanted & self.capabilities
        settings = self.settings if mode is None else self.settings.model_copy(update={"mode": mode})
        child = PolicyEngine(settings, capabilities=held)
        child.session_allow = list(self.session_allow)
        return child

    def add_session_rule(self, rule: Rule) -> str:
        self.session_allow.append(rule)
        return f"session-allow[{len(self.session_allow) - 1}]"

    # -- the decision -----------------------------------------------------
    def decide(self, tool: Tool, args: Mapping[str, Any], root: str) -> Decision:
        """The verdict for ``tool`` called with normalized ``args`` in workspace ``root``."""
        missing = sorted(set(tool.capabilities) - self.capabilities) if self.capabilities is not None else []
        if missing:
            held = ", ".join(sorted(self.capabilities or ())) or "none"
            return Decision("deny", "capability",
                            f"{tool.name} needs the capabilities {', '.join(missing)}, which this "
                            f"session does not hold (it holds: {held}). Use a tool within them, "
                            "or ask the user to run this step.")
        call = _Call(tool, args, root, paths=path_fields(tool))
        if tool.name == "bash":
            command = args.get("command")
            call.parsed = split_command(command if isinstance(command, str) else "")
        raw = args.get("command") if call.is_bash else None

        hit = self._first("deny", self.settings.deny, call)
        if hit is not None:
            idx, rule, where = hit
            return Decision("deny", f"deny[{idx}]",
                            rule.reason or f"the operator's deny rule deny[{idx}] ({rule.describe()}) "
                            f"matches{where}. Do not retry this; find another way or ask the user.",
                            commands=(where.removeprefix(": "),) if where else ())
        if self.mode == "plan" and tool.mutates:
            return Decision("deny", "mode:plan",
                            f"{tool.name} changes things, and this session is in plan mode (read-only "
                            "tools only). Describe the change in your plan instead of making it.")
        if call.parsed is not None:
            labels = destructive_reasons(call.parsed, raw if isinstance(raw, str) else "")
            if labels:
                return Decision("ask", "destructive",
                                "destructive: " + "; ".join(labels) + " (always asks, in every mode)",
                                commands=tuple(c.text for c in call.parsed.commands))
            if call.parsed.unparseable:
                return Decision("ask", "unparseable",
                                "policy cannot read this command safely: "
                                + "; ".join(call.parsed.unparseable),
                                commands=(raw,) if isinstance(raw, str) else ())
            if call.parsed.opaque:
                return Decision("ask", "opaque",
                                "runs code policy cannot judge: "
                                + "; ".join(o.describe() for o in call.parsed.opaque)
                                + " (asks in every mode: inline code is read, not guessed)",
                                commands=(raw,) if isinstance(raw, str) else ())
        hit = self._first("ask", self.settings.ask, call)
        if hit is not None:
            idx, rule, where = hit
            return Decision("ask", f"ask[{idx}]",
                            rule.reason or f"the operator's rule ask[{idx}] ({rule.describe()}) "
                            f"matches{where}", commands=(where.removeprefix(": "),) if where else ())
        return self._allow_or_default(call)

    def _first(self, kind: str, rules: list[Rule], call: _Call) -> tuple[int, Rule, str] | None:
        for idx, rule in enumerate(rules):
            if call.parsed is not None:
                for cmd in call.parsed.commands:
                    if _command_matches(rule, cmd, call.args):
                        return idx, rule, f": {cmd.text}"
                if not call.parsed.commands and rule.command is None and rule.program is None \
                        and _call_matches(rule, "bash", call.args, [], call.root):
                    return idx, rule, ""
            elif _call_matches(rule, call.tool.name, call.args, call.paths, call.root):
                return idx, rule, ""
        return None

    def _allow_rules(self) -> list[tuple[str, Rule]]:
        return ([(f"allow[{i}]", r) for i, r in enumerate(self.settings.allow)]
                + [(f"session-allow[{i}]", r) for i, r in enumerate(self.session_allow)])

    def _allow_or_default(self, call: _Call) -> Decision:
        rules = self._allow_rules()
        tool = call.tool
        if call.parsed is not None and call.parsed.commands:
            by: list[str] = []
            uncovered: list[SimpleCommand] = []
            for cmd in call.parsed.commands:
                rid = next((rid for rid, r in rules if _command_matches(r, cmd, call.args)), None)
                if rid is None:
                    uncovered.append(cmd)
                elif rid not in by:
                    by.append(rid)
            if not uncovered:
                return Decision("allow", ",".join(by), "every command is covered by an allow rule")
            default = self._mode_default(tool)
            if default.verdict == "allow":
                return default
            texts = tuple(c.text for c in uncovered)
            return Decision(default.verdict, default.decided_by,
                            default.reason + ". Not covered by an allow rule: " + "; ".join(texts),
                            commands=texts, always=self._bash_always(uncovered))
        for rid, rule in rules:
            if _call_matches(rule, tool.name, call.args, call.paths, call.root):
                return Decision("allow", rid, f"allowed by {rid} ({rule.describe()})")
        default = self._mode_default(tool)
        if default.verdict == "ask":
            return Decision("ask", default.decided_by, default.reason, always=self._always(call))
        return default

    def _mode_default(self, tool: Tool) -> Decision:
        if not tool.mutates:
            return Decision("allow", f"mode:{self.mode}", f"{tool.name} is read-only")
        if self.mode == "auto":
            return Decision("allow", "mode:auto", "auto mode runs what no rule stops")
        return Decision("ask", f"mode:{self.mode}", f"{tool.name} changes things and {self.mode} mode "
                        "asks before every change no allow rule covers")

    @staticmethod
    def _bash_always(cmds: list[SimpleCommand]) -> tuple[Rule, ...]:
        """The rules an "always allow" answer stores: one per command that asked.

        A program with subcommands of its own gets program and subcommand (``git
        status``: every ``git status``, no other git).  For any other program the first
        operand is data, not a subcommand (``echo done``, ``cat README.md``, ``python
        x.py``): a rule naming it as one would read as nonsense, so the rule is the
        command exactly as written (``command``, glob characters escaped); a command
        with options only (``ls -la``) gets its program.
        """
        out: list[Rule] = []
        for cmd in cmds:
            if cmd.program is None or cmd.dynamic_program:
                return ()
            sub = cmd.subcommand
            if sub is None:
                rule = Rule(tool="bash", program=cmd.program)
            elif cmd.program_name in SUBCOMMAND_PROGRAMS:
                rule = Rule(tool="bash", program=cmd.program, subcommand=sub)
            else:
                rule = Rule(tool="bash", command=glob.escape(cmd.text))
            if rule not in out:
                out.append(rule)
        return tuple(out)

    @staticmethod
    def _always(call: _Call) -> tuple[Rule, ...]:
        paths = [v for p in call.paths if isinstance(v := call.args.get(p), str)]
        if paths:
            return tuple(Rule(tool=call.tool.name, path=escape(p)) for p in paths)
        return (Rule(tool=call.tool.name),)

