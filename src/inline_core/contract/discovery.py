"""Finding families: the `inline_core.families` entry point group (torch-free).

A family ships as a distribution whose metadata names its `Family` subclass:

    [project.entry-points."inline_core.families"]
    zimage = "inline_core.families.zimage:ZImageFamily"

The built-in family is registered the same way, in this project's own `pyproject.toml`. A family
whose module fails to import, or that is not a `Family`, is kept as unavailable with its reason
(health lists it), and the rest of the server runs. The worker group's ranks find a family by name
through the same group, so a family installed for the server is installed for its ranks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from inline_core.contract.builder import FamilyBuilder
from inline_core.contract.family import Family
from inline_core.dotted import resolve_object

log = logging.getLogger(__name__)

GROUP = "inline_core.families"
OWN_DISTRIBUTION = "inline-core"  # the built-in families are this project's own entry points


@dataclass(frozen=True)
class FamilyEntry:
    """One entry point of the group: its family class, or why it has none."""

    entry: str  # the entry point's name
    value: str  # "package.module:Class"
    family: type[Family] | None
    error: str | None = None
    distribution: str | None = None  # the distribution that declares it

    @property
    def builtin(self) -> bool:
        return self.distribution == OWN_DISTRIBUTION

    def to_json(self) -> dict[str, object]:
        name = self.family.name if self.family is not None else self.entry
        return {
            "name": name,
            "entryPoint": self.value,
            "available": self.error is None,
            "reason": self.error,
        }


def discover() -> list[FamilyEntry]:
    """Every family the installed distributions declare, in entry point name order."""
    found: list[FamilyEntry] = []
    seen: set[str] = set()
    for point in sorted(entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        if point.value in seen:  # an editable install can list one distribution twice
            continue
        seen.add(point.value)
        found.append(_load(point))
    return found


def _load(point: EntryPoint) -> FamilyEntry:
    dist = point.dist.name if point.dist is not None else None
    try:
        loaded: object = point.load()
    except Exception as exc:  # a broken family never stops the server
        log.warning("model family %r (%s) failed to import: %s", point.name, point.value, exc)
        return FamilyEntry(point.name, point.value, None, f"{type(exc).__name__}: {exc}", dist)
    if not (isinstance(loaded, type) and issubclass(loaded, Family)):
        kind = type(loaded).__name__  # pyright: ignore[reportUnknownArgumentType]
        reason = f"{point.value} is a {kind}, not a Family subclass"
        log.warning("model family %r skipped: %s", point.name, reason)
        return FamilyEntry(point.name, point.value, None, reason, dist)
    return FamilyEntry(point.name, point.value, loaded, None, dist)


def family_named(name: str) -> type[Family]:
    """The family class whose `name` is `name` (a rank rebuilding its stack looks it up so)."""
    for entry in discover():
        if entry.family is not None and entry.family.name == name:
            return entry.family
    raise LookupError(f"no installed model family is named {name!r}")


def load_builder(family: type[Family]) -> FamilyBuilder:
    """The family's torch side (imports torch and whatever the family needs)."""
    builder = resolve_object(family.builder)
    if isinstance(builder, type):
        builder = cast(Any, builder)()
    return cast(FamilyBuilder, builder)
