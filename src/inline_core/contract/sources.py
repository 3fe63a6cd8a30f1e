"""Which files one render of a family uses, and what is missing when they are not (torch-free).

`Sources` names a family's stack part by part (`transformer`, `vae`, `text_encoder`, `tokenizer`,
`scheduler`, ... as the family calls them). Resolution happens once per run attempt, at submit and
off the event loop; residency keys, node cache keys and the worker group's rank specs are built
from the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from inline_core.errors import ModelMissing
from inline_core.models.source import Source

DEFAULT = "default"  # the identity of a part the family supplies itself (a built-in config)


@dataclass(frozen=True)
class Sources:
    """A family's stack: each part's files (None: the family's built-in default), and the model's
    catalog name."""

    family: str
    model_name: str
    parts: tuple[tuple[str, Source | None], ...]

    @classmethod
    def of(cls, family: str, model_name: str, parts: Mapping[str, Source | None]) -> Sources:
        return cls(family, model_name, tuple(parts.items()))

    def get(self, part: str) -> Source | None:
        return dict(self.parts).get(part)

    def require(self, part: str) -> Source:
        source = self.get(part)
        if source is None:
            raise KeyError(f"the {self.family} stack has no {part}")
        return source

    def identity(self) -> str:
        return "|".join(DEFAULT if s is None else s.identity() for _name, s in self.parts)

    def to_json(self) -> dict[str, object]:
        return {
            "family": self.family,
            "modelName": self.model_name,
            "parts": {name: None if s is None else s.to_json() for name, s in self.parts},
        }

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> Sources:
        parts = value.get("parts")
        if not isinstance(parts, dict):
            raise ValueError("a stack spec names no parts")
        named = cast(dict[str, object], parts)
        return cls(
            str(value.get("family") or ""),
            str(value.get("modelName") or ""),
            tuple((name, Source.from_json(spec)) for name, spec in named.items()),
        )


@dataclass(frozen=True)
class Missing:
    """A part that is not there, and where to put it."""

    component: str
    hint: str


@dataclass(frozen=True)
class Resolution:
    family_title: str
    sources: Sources | None
    missing: tuple[Missing, ...]

    def require(self, node_id: str | None = None) -> Sources:
        """The sources, or `ModelMissing` naming each missing part and where to put it."""
        if self.sources is not None and not self.missing:
            return self.sources
        lines = "; ".join(f"{m.component}: {m.hint}" for m in self.missing)
        raise ModelMissing(f"{self.family_title} is missing model files. {lines}", node_id=node_id)
