"""The event roster is the union: every class in it is exported, shown and mapped to OCSF."""

from __future__ import annotations

import ast
from pathlib import Path

import appliance.events as events
from appliance.events import EVENT_CLASSES

EVENTS = Path(events.__file__).parent


def _named(module: str) -> set[str]:
    """The event classes a module names (``ev.RunStarted``: it imports the models as ``ev``)."""
    tree = ast.parse((EVENTS / module).read_text(encoding="utf-8"))
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "ev"}


def test_the_roster_is_derived_from_the_union() -> None:
    names = [c.__name__ for c in EVENT_CLASSES]
    assert len(names) == len(set(names)) >= 25
    types = [c.model_fields["type"].default for c in EVENT_CLASSES]
    assert all(types) and len(set(types)) == len(types)  # the discriminator tells each apart


def test_every_event_class_is_exported_shown_and_mapped_to_ocsf() -> None:
    names = {c.__name__ for c in EVENT_CLASSES}
    assert names <= set(events.__all__)
    # show() ends in assert_never (mypy holds it whole); the OCSF mapper names each class
    assert names - _named("_shown.py") == set()
    assert names - _named("_ocsf.py") == set()
