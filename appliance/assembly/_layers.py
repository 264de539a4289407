"""The effective settings: the site layer narrowed by the engineer's, with where each value came from.

The one place the layers meet (docs/design.md, "Who decides: the site, then the
engineer"). The site's settings (:mod:`appliance.assembly._site_layer`) are the
ceiling; the user layer (``ABHED_HOME/config.json`` or ``--config``, then the
flags of the door) may only narrow them: a stricter mode, more deny and ask
rules, fewer capabilities, more redaction, lower limits. Anything looser is
refused before anything starts, naming the setting, the site file and what
the engineer may do instead. Every field of :class:`Config` has a declared
direction in :data:`DIRECTIONS`; ``tests/appliance/compose/test_layers.py``
fails for a field without one, so a new setting must be classified.

On a development checkout (no site layer) the user layer is the whole
config, as before: there is nobody above the engineer.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from appliance._errors import ConfigError
from appliance.assembly._config import Config, read_config
from appliance.assembly._site_layer import SiteLayer, find_site
from foundation import (
    FoundationError,
    as_mode,
    modes_no_looser,
    stricter_or_equal,
    validate_document,
)

__all__ = ["DIRECTIONS", "Direction", "Layered", "Origin", "LayerRule", "Widening", "WideningRefused",
           "SYSTEM_PATH", "govern_environment", "layer", "layers_of", "leaf_fields", "load_config",
           "rule_for"]

Direction = Literal["stricter", "lower", "higher", "union", "subset", "stronger", "site_only",
                    "kept", "gated", "free"]
OriginKind = Literal["site", "user", "flag", "default"]


@dataclass(frozen=True)
class LayerRule:
    """How the user layer may change one setting.

    ``stricter``: a mode no looser (plan > ask > auto). ``lower`` / ``higher``:
    a number no higher / no lower (``unbounded``: the value meaning "no
    limit"). ``union``: the user's entries are added to the site's.
    ``subset``: the user may keep only some of the site's entries.
    ``stronger``: a sandbox backend no weaker. ``site_only``: only the site
    sets it. ``kept``: once the site sets it the user cannot change or unset
    it; unset, the user may. ``gated``: the site's entries stay; the user's
    are added only where the site's ``switch`` allows. ``free``: no policy in
    it; the user decides.
    """

    direction: Direction
    why: str
    switch: str | None = None
    unbounded: tuple[Any, ...] = ()


_BACKEND_RANK = {"microvm": 3, "auto": 2, "bwrap": 1, "host": 0}

_LIMIT = "a limit: the engineer may lower it, never raise it"
DIRECTIONS: dict[str, LayerRule] = {
    # -- tools ---------------------------------------------------------------------------
    "tools.secret_paths": LayerRule("union", "files no tool may read or write: the engineer may add "
                               "patterns, never remove or un-secret one (a '!' pattern)"),
    "tools.ignore": LayerRule("union", "files the walks skip: more is only less for the model to see"),
    "tools.default_excludes": LayerRule("union", "folders the walks skip: more is only less to see"),
    "tools.create_parent_dirs": LayerRule("free", "whether write makes missing folders: policy still "
                                     "decides every write"),
    "tools.new_file_mode": LayerRule("free", "permissions of files the engineer's own agent creates "
                                "in the engineer's own workspace"),
    "tools.read_default_limit_lines": LayerRule("lower", _LIMIT),
    "tools.read_max_line_chars": LayerRule("lower", _LIMIT),
    "tools.read_max_output_chars": LayerRule("lower", _LIMIT),
    "tools.glob_max_results": LayerRule("lower", _LIMIT),
    "tools.edit_max_file_bytes": LayerRule("lower", _LIMIT),
    "tools.fuzzy_max_file_bytes": LayerRule("lower", _LIMIT),
    "tools.grep_engine": LayerRule("free", "which engine searches: the same results, another speed"),
    # -- sandbox -------------------------------------------------------------------------
    "sandbox.backend": LayerRule("stronger", "where commands run: microvm > auto > bwrap > host; "
                            "the engineer may only choose a stronger one"),
    "sandbox.image_dir": LayerRule("site_only", "the microVM image: an image of the engineer's own "
                              "would be a sandbox of their own"),
    "sandbox.qemu_binary": LayerRule("site_only", "the program that is the sandbox: one of the "
                                "engineer's own could be no sandbox at all"),
    "sandbox.accel": LayerRule("free", "KVM or software emulation: the same isolation, another speed"),
    "sandbox.memory_mib": LayerRule("lower", _LIMIT),
    "sandbox.vcpus": LayerRule("lower", _LIMIT),
    "sandbox.boot_timeout_s": LayerRule("lower", _LIMIT),
    "sandbox.boot_at_open": LayerRule("free", "boot at start or on the first command: the same VM"),
    "sandbox.kill_grace_s": LayerRule("lower", _LIMIT),
    "sandbox.max_output_bytes": LayerRule("lower", _LIMIT),
    "sandbox.env_allow": LayerRule("subset", "host variables passed into the sandbox: the engineer may "
                              "pass fewer, never more (more could carry secrets in)"),
    # -- policy --------------------------------------------------------------------------
    "policy.mode": LayerRule("stricter", "plan > ask > auto: the engineer may only choose a stricter "
                        "mode (unless the site sets policy.allow_looser_mode)"),
    "policy.allow_looser_mode": LayerRule("site_only", "whether a door may choose a looser mode"),
    "policy.deny": LayerRule("union", "the engineer may add deny rules; the site's all stay"),
    "policy.ask": LayerRule("union", "the engineer may add ask rules; the site's all stay"),
    "policy.allow": LayerRule("gated", "allow rules widen what runs without asking",
                         switch="site.allow_user_allow_rules"),
    "policy.capabilities": LayerRule("subset", "the engineer may grant fewer capabilities, never more"),
    # -- what the agent may call -----------------------------------------------------------
    "extensions": LayerRule("gated", "the site's extensions all stay; an engineer's own must be "
                       "veto-only (no tools of its own: those widen)",
                       switch="site.allow_user_extensions"),
    "mcp_servers": LayerRule("gated", "MCP servers add tools: only the site's reviewed ones (name and "
                        "pin)", switch="site.allow_user_mcp_servers"),
    "custom_providers": LayerRule("gated", "which model servers the agent talks to",
                             switch="site.allow_user_providers"),
    "default_provider": LayerRule("free", "which of the allowed providers is used when none is named"),
    "catalog": LayerRule("kept", "the model catalog (context lengths, honoured sampling): the site's "
                    "once it names one"),
    "serve": LayerRule("free", "`abhed serve` starts a model server of the engineer's own; sessions "
                  "still talk only to the allowed providers"),
    # -- the record ----------------------------------------------------------------------
    "events.redact": LayerRule("union", "the engineer may add redaction patterns; the site's all stay"),
    "events.witness_dir": LayerRule("kept", "the shared host's head witness: cannot be turned off or "
                               "moved once the site sets it"),
    "events.forward": LayerRule("kept", "live forwarding to the SIEM: cannot be turned off or "
                           "redirected once the site sets it"),
    "events.reserve_mb": LayerRule("higher", "free disk kept for the log: the engineer may keep more, "
                              "never less", unbounded=()),
    "events.rotate_mb": LayerRule("lower", "segments sealed by size: the engineer may seal sooner, not "
                             "later or never", unbounded=(0,)),
    "events.rotate_days": LayerRule("lower", "segments sealed by age: the engineer may seal sooner, "
                               "not later or never", unbounded=(0,)),
    # -- the loop and subagents ---------------------------------------------------------
    "loop.max_turns": LayerRule("lower", _LIMIT),
    "loop.max_tokens": LayerRule("lower", _LIMIT),
    "loop.deadline_s": LayerRule("lower", _LIMIT),
    "loop.max_completion_tokens": LayerRule("lower", _LIMIT, unbounded=(None,)),
    "loop.context_tokens": LayerRule("lower", "the context compaction works against: lower compacts "
                                "sooner", unbounded=(None,)),
    "loop.compact_at": LayerRule("lower", "compact sooner, never later"),
    "loop.max_repeated_failures": LayerRule("lower", _LIMIT, unbounded=(0,)),
    "tasks": LayerRule("lower", _LIMIT),
    "site": LayerRule("site_only", "what the site lets an engineer add: the site's word alone"),
}


def leaf_fields(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every setting's dotted name, down to the fields of nested sections."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += leaf_fields(ann, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def rule_for(path: str) -> LayerRule | None:
    """The rule of ``path`` or of the nearest section above it that has one."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        rule = DIRECTIONS.get(".".join(parts[:i]))
        if rule is not None:
            return rule
    return None


@dataclass(frozen=True)
class Origin:
    """Where one effective value came from."""

    kind: OriginKind
    where: str  # the file, the flag (``abhed run --max-turns``), or "built-in"

    def describe(self) -> str:
        return f"{self.kind}: {self.where}" if self.kind != "default" else "default"


@dataclass(frozen=True)
class Widening:
    """One loosening the user layer asked for, and what the engineer may do instead."""

    setting: str
    asked: str
    site: str
    where: str  # the user file or flag that asked
    instead: str

    def line(self, site_file: Path) -> str:
        return (f"{self.setting}: {self.where} asks for {self.asked}, looser than the site's "
                f"{self.site} ({site_file}). {self.instead}")


class WideningRefused(ConfigError):
    """The user layer asks for something looser than the site allows; nothing starts."""

    def __init__(self, refusals: list[Widening], site_file: Path) -> None:
        self.refusals = refusals
        lines = [r.line(site_file) for r in refusals]
        super().__init__(
            f"refused: {len(refusals)} setting(s) would loosen the site's policy; an engineer "
            "may narrow the site's settings, never widen them (`abhed config show` shows each "
            "value and where it comes from):\n  " + "\n  ".join(lines))


@dataclass
class Layered:
    """The effective settings and, per dotted setting (list entries as ``name[i]``), its origin."""

    config: Config
    origins: dict[str, Origin]
    site: SiteLayer | None
    user_file: str
    refusals: list[Widening] = field(default_factory=list)  # only when asked not to raise

    @property
    def digest(self) -> str:
        """sha256 of the effective settings as canonical JSON: what a session records."""
        text = json.dumps(self.config.model_dump(mode="json"), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def record(self) -> dict[str, Any]:
        """What every session's start records about what governed it (``session_started.settings``).

        ``"none"`` for the site's part on a development checkout; the keys are
        the ones the exports read (``appliance.events``' OCSF mapping, the auditor).
        """
        o = self.site.origin if self.site is not None else None
        return {"site": o.site if o else "none", "release": str(o.release) if o else "none",
                "bundle_manifest_sha256": o.bundle_manifest_sha256 if o else "none",
                "signing_key_ids": list(o.signing_key_ids) if o else [],
                "site_settings_sha256": o.settings_sha256 if o else "none",
                "effective_settings_sha256": self.digest}

    def origin(self, path: str) -> Origin:
        """Where ``path``'s value came from (a section: its first value's origin; a list's
        entry: its own, else the list's)."""
        if path in self.origins:
            return self.origins[path]
        if path.endswith("]") and "[" in path:
            return self.origin(path[:path.rindex("[")])
        for key, found in self.origins.items():
            if key.startswith(path + ".") or key.startswith(path + "["):
                return found
        return Origin("default", "built-in")


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _get(data: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _wider_number(rule: LayerRule, asked: Any, base: Any) -> bool:
    """Whether ``asked`` is looser than ``base`` for a ``lower``/``higher`` rule."""
    if asked == base:
        return False
    if rule.direction == "lower":
        if base in rule.unbounded:
            return False  # no limit above: any value is lower
        if asked in rule.unbounded:
            return True  # asks for no limit where the site has one
        return bool(asked > base)
    return bool(asked < base)


def _leave(mine: Origin) -> str:
    """What the engineer may do instead: drop the flag, or the setting from their file."""
    return f"leave out {mine.where}" if mine.kind == "flag" else f"remove it from {mine.where}"


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def _named(items: Iterable[Any]) -> dict[str, Any]:
    return {str(i.get("name")): i for i in items if isinstance(i, Mapping)}


class _Merge:
    """One layering: the site dict, the user dict, and what comes of each setting."""

    def __init__(self, site: SiteLayer | None, user: dict[str, Any], user_origins: dict[str, Origin],
                 defaults: dict[str, Any]) -> None:
        self.site = site
        self.site_raw: dict[str, Any] = site.settings.model_dump(mode="json", exclude_unset=True) \
            if site is not None else {}
        self.site_full = site.settings.model_dump(mode="json") if site is not None else defaults
        self.user = user
        self.user_origins = user_origins
        self.defaults = defaults
        self.out: dict[str, Any] = {}
        self.origins: dict[str, Origin] = {}
        self.refusals: list[Widening] = []
        self.site_where = str(site.settings_file) if site is not None else ""

    def user_where(self, path: str) -> Origin:
        parts = path.split(".")
        for i in range(len(parts), 0, -1):
            found = self.user_origins.get(".".join(parts[:i]))
            if found is not None:
                return found
        return self.user_origins[""]

    def switch(self, name: str | None) -> bool:
        if name is None:
            return False
        found, value = _get(self.site_full, name)
        return bool(found and value)

    def refuse(self, path: str, asked: Any, base: Any, instead: str) -> None:
        self.refusals.append(Widening(path, _show(asked), _show(base),
                                      self.user_where(path).where, instead))

    def take(self, path: str, value: Any, origin: Origin) -> None:
        _set(self.out, path, value)
        self.origins[path] = origin

    def base(self, path: str) -> tuple[Any, Origin]:
        found, value = _get(self.site_raw, path)
        if found:
            return value, Origin("site", self.site_where)
        return _get(self.defaults, path)[1], Origin("default", "built-in")

    def settle(self, path: str) -> None:
        rule = rule_for(path)
        assert rule is not None, f"{path} has no declared direction (appliance.assembly._layers)"
        base, base_origin = self.base(path)
        asked_set, asked = _get(self.user, path)
        if self.site is None:  # a development checkout: the user layer is the whole config
            if asked_set:
                self.take(path, asked, self.user_where(path))
            else:
                self.take(path, base, base_origin)
            return
        if not asked_set or asked == base:
            self.take(path, base, base_origin)
            return
        mine = self.user_where(path)
        handler: dict[Direction, Callable[[str, LayerRule, Any, Any, Origin, Origin], None]] = {
            "free": self._free, "lower": self._number, "higher": self._number,
            "stricter": self._mode, "stronger": self._backend, "union": self._union,
            "subset": self._subset, "site_only": self._site_only, "kept": self._kept,
            "gated": self._gated}
        handler[rule.direction](path, rule, asked, base, base_origin, mine)

    # -- one handler per direction ---------------------------------------------------------
    def _free(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        self.take(path, asked, mine)

    def _number(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        if _wider_number(rule, asked, base):
            way = "lower" if rule.direction == "lower" else "higher"
            self.refuse(path, asked, base, f"Choose {_show(base)} or {way}, or {_leave(mine)}.")
            self.take(path, base, b)
        else:
            self.take(path, asked, mine)

    def _mode(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        looser_ok = self.switch("policy.allow_looser_mode")
        wanted, ceiling = as_mode(asked), as_mode(base)
        if ceiling is not None and not looser_ok \
                and (wanted is None or not stricter_or_equal(wanted, ceiling)):
            stricter = ", ".join(modes_no_looser(ceiling))
            self.refuse(path, asked, base, f"Choose one of {stricter}; only the site can allow a "
                        "looser mode (policy.allow_looser_mode).")
            self.take(path, base, b)
        else:
            self.take(path, asked, mine)

    def _backend(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        if _BACKEND_RANK.get(asked, -1) < _BACKEND_RANK.get(base, 99):
            stronger = ", ".join(k for k, v in _BACKEND_RANK.items() if v >= _BACKEND_RANK[base])
            self.refuse(path, asked, base, f"Choose one of {stronger}.")
            self.take(path, base, b)
        else:
            self.take(path, asked, mine)

    def _add(self, path: str, base: Any, b: Origin, asked: Any, mine: Origin,
             refused: Callable[[Any, list[Any]], bool]) -> None:
        """The site's entries, then each of the user's that ``refused`` lets in (it records why not)."""
        kept = list(base or ())
        for i in range(len(kept)):
            self.origins[f"{path}[{i}]"] = b
        seen = {_key(i) for i in kept}
        for item in asked or ():
            if _key(item) in seen or refused(item, kept):
                continue  # the site's own entry, repeated; or refused, and said why
            seen.add(_key(item))
            self.origins[f"{path}[{len(kept)}]"] = mine
            kept.append(item)
        _set(self.out, path, kept)
        self.origins[path] = mine if len(kept) > len(base or ()) else b

    def _union(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        def refused(item: Any, kept: list[Any]) -> bool:
            if path == "tools.secret_paths" and isinstance(item, str) and item.startswith("!"):
                self.refuse(path, item, base, "A '!' pattern takes a file out of the secrets; "
                            "only the site can. Add patterns, or leave the list out.")
                return True
            return False

        self._add(path, base, b, asked, mine, refused)

    def _subset(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        if base is None:  # the site grants everything: any list is fewer
            self.take(path, asked, mine)
            return
        extra = [x for x in (asked if asked is not None else ["(everything)"]) if x not in base]
        if extra:
            self.refuse(path, extra, base, f"Keep to entries of the site's list, or "
                        f"{_leave(mine)}.")
            self.take(path, base, b)
        else:
            self.take(path, asked, mine)

    def _site_only(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin,
                   mine: Origin) -> None:
        self.refuse(path, asked, base, f"Only the site sets this; {_leave(mine)}.")
        self.take(path, base, b)

    def _kept(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        if b.kind == "site":
            self.refuse(path, asked, base, f"The site set this and it stays; remove it from "
                        f"{mine.where}.")
            self.take(path, base, b)
        else:
            self.take(path, asked, mine)

    def _gated(self, path: str, rule: LayerRule, asked: Any, base: Any, b: Origin, mine: Origin) -> None:
        by_name = _named(base or ()) if path != "policy.allow" else {}
        allowed = self.switch(rule.switch)

        def refused(item: Any, kept: list[Any]) -> bool:
            name = item.get("name") if isinstance(item, Mapping) else None
            if name is not None and str(name) in by_name:
                self.refuse(f"{path}.{name}", item, by_name[str(name)], "The site's entry of that "
                            f"name stays as the site wrote it; remove yours from {mine.where} or "
                            "give it another name.")
            elif not allowed:
                self.refuse(path, item, [i.get("name", i) if isinstance(i, Mapping) else i
                                         for i in kept],
                            f"Only the site's entries are allowed here; remove it from {mine.where}, "
                            f"or ask the operator to set {rule.switch}: true in the site spec.")
            elif path == "extensions" and (problem := _own_extension_problem(item)):
                self.refuse(path, item, "veto-only extensions", problem)
            else:
                return False
            return True

        self._add(path, base, b, asked, mine, refused)


_TOOL_EVENTS = {"list_tools", "invoke_tool"}


def _own_extension_problem(spec: Mapping[str, Any]) -> str | None:
    """Why an engineer's own extension is refused: only veto-only ones (no tools) may be added."""
    events = spec.get("events") or []
    if not events:
        return ("An engineer's own extension must list its events, and list neither list_tools "
                "nor invoke_tool: subscribed to every event it could add tools, which widens.")
    if _TOOL_EVENTS & set(events):
        return ("An engineer's own extension may veto, ask and rewrite, not add tools "
                "(list_tools, invoke_tool): drop those events.")
    return None


def layer(site: SiteLayer | None, user: Config, user_file: str,
          flags: Mapping[str, tuple[Any, str]] | None = None, *, refuse: bool = True) -> Layered:
    """The effective settings: ``site`` narrowed by ``user`` and then by the door's ``flags``.

    ``flags`` maps a dotted setting to (value, the flag that set it, e.g.
    ``"abhed run --max-turns"``); flags are the user layer too, so they narrow
    the site's values like the config file does.  ``refuse`` False: a
    loosening keeps the site's value and is listed in :attr:`Layered.refusals`
    instead (what ``abhed config show`` prints).

    Raises:
        WideningRefused: something asks for more than the site allows (every such thing named).
        ConfigError: the combination does not make a valid config.
    """
    defaults = Config().model_dump(mode="json")
    user_data = user.model_dump(mode="json", exclude_unset=True)
    user_origins = {"": Origin("user", user_file)}
    for path, (value, flag) in (flags or {}).items():
        _set(user_data, path, value)
        user_origins[path] = Origin("flag", flag)
    merge = _Merge(site, user_data, user_origins, defaults)
    if site is not None and "image_dir" not in merge.site_raw.get("sandbox", {}):
        # The default, ABHED_HOME/image, is the engineer's to fill: under a site the image is
        # the release's own, laid out beside its settings by the installer.
        merge.site_raw.setdefault("sandbox", {})["image_dir"] = str(site.directory.parent / "image")
    for path in leaf_fields():
        merge.settle(path)
    if merge.refusals and refuse:
        assert site is not None
        raise WideningRefused(merge.refusals, site.settings_file)
    # Which fields count as set matters (policy.mode set by someone is a ceiling): keep only
    # what the site or the user set, so the defaults stay defaults.
    present = {p for p, o in merge.origins.items() if o.kind != "default" and "[" not in p}
    if site is not None:
        # With a site layer the mode is always a ceiling: the site's, or ask (the default)
        # where it names none; `--mode` and rpc's "mode" are bounded by it (resolve_mode).
        present.add("policy.mode")
    data: dict[str, Any] = {}
    for path in present:
        _set(data, path, _get(merge.out, path)[1])
    source = user_file if site is None else f"{site.settings_file} narrowed by {user_file}"
    try:
        config = validate_document(data, Config, what="effective settings", source=source)
    except FoundationError as exc:
        raise ConfigError(f"the site's settings and yours do not make a valid config: {exc}") \
            from None
    config._source = str(site.settings_file) if site is not None else user.source
    layered = Layered(config, merge.origins, site, user_file, merge.refusals)
    config._layered = layered
    return layered


def load_config(path: Path | None = None,
                flags: Mapping[str, tuple[Any, str]] | None = None) -> Config:
    """The effective settings every door runs under (see the module docstring).

    ``path``: the user layer's file (``--config``; default ``ABHED_HOME/config.json``);
    ``flags``: the door's own narrowing, as for :func:`layer`.

    Raises:
        SiteRefused: a site layer is present but broken (fail closed).
        WideningRefused: the user layer asks for more than the site allows.
        ConfigError: the user's file is missing (when named), unreadable or invalid.
    """
    site = find_site()
    user = read_config(path)
    layered = layer(site, user, user.source, flags)
    if site is not None:
        govern_environment()
    return layered.config


#: Where programs are looked up under a site layer: the system's directories, never the
#: engineer's PATH (a `bwrap`, `qemu-system-x86_64`, `rg` or an extension's command of
#: their own, first on PATH, would stand in for the site's).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def govern_environment() -> None:
    """Under a site layer, this process looks programs up on :data:`SYSTEM_PATH` only.

    The sandbox (bwrap, QEMU, virtiofsd), the grep engine, and the site's
    extensions and MCP servers named by a bare command are found through PATH;
    an engineer's own PATH could put a program of theirs in front.  What the
    engineer's shell commands see inside the sandbox is the sandbox's own
    environment (``sandbox.env_allow``), not this.
    """
    os.environ["PATH"] = SYSTEM_PATH


def layers_of(config: Config) -> Layered:
    """The layering behind ``config`` (one made by hand counts as the user's alone)."""
    found = config._layered
    if isinstance(found, Layered):
        return found
    return layer(None, config, config.source)
