"""Which mode a run gets: the caller's wish bounded by the operator's config.

Every door (``abhed run``, ``abhed tool``, rpc ``start``, the TUI, a
subagent) asks :func:`resolve_mode`, so the rule cannot differ between them:

- no mode requested: the operator's ``policy.mode`` (or the built-in default);
- a mode requested and the operator set ``policy.mode``: a stricter or equal
  one is taken; a looser one is refused, naming the setting and the file,
  unless the operator set ``policy.allow_looser_mode: true``;
- a mode requested and no ``policy.mode`` configured: the caller's choice
  (a developer's own machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from appliance.policy._errors import ModeRefused
from appliance.policy._settings import PolicySettings
from foundation import MODES, Mode, as_mode, modes_no_looser, stricter_or_equal

__all__ = ["ChosenBy", "ModeChoice", "resolve_mode", "stricter_or_equal"]

ChosenBy = Literal["caller", "operator", "default"]


@dataclass(frozen=True)
class ModeChoice:
    """The effective mode, who chose it, and at which door (recorded in ``run_started``)."""

    mode: Mode
    chosen_by: ChosenBy
    door: str = ""


def operator_mode(policy: PolicySettings) -> Mode | None:
    """The mode the operator wrote in config, or ``None`` when it was left to the default."""
    return policy.mode if "mode" in policy.model_fields_set else None


def resolve_mode(requested: Mode | str | None, policy: PolicySettings, *, door: str,
                 config_file: str | None = None) -> ModeChoice:
    """The mode for a run started at ``door`` (e.g. ``"abhed run --mode"``).

    Raises:
        ModeRefused: ``requested`` is not a mode, or is looser than the
            operator's ``policy.mode`` and ``allow_looser_mode`` is off.
    """
    configured = operator_mode(policy)
    if requested is None:
        return ModeChoice(policy.mode, "operator" if configured is not None else "default", door)
    wanted = as_mode(requested)
    if wanted is None:
        raise ModeRefused(f"{door}: {str(requested)[:40]!r} is not a mode; modes: "
                          f"{', '.join(MODES)}")
    if configured is not None and not stricter_or_equal(wanted, configured) \
            and not policy.allow_looser_mode:
        where = config_file or "config.json"
        stricter = ", ".join(modes_no_looser(configured))
        raise ModeRefused(
            f"{door} {wanted}: refused, it is looser than the operator's policy.mode "
            f"\"{configured}\" set in {where}. A caller may choose the same or a stricter mode "
            f"({stricter}), not a looser one; the operator can allow that with "
            f"\"policy\": {{\"allow_looser_mode\": true}} in {where}.")
    return ModeChoice(wanted, "caller", door)
