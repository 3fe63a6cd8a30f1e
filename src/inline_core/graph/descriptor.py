"""Node descriptors: the data half of a node (ports, params, pickers), served at `/v1/models`.

A descriptor declares everything a client needs to draw the node and everything the validator needs
to check a graph before it runs. The behaviour half (`NodeRunner`) is registered beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from inline_core.graph.schema import PortKind


class ParamWidget(StrEnum):
    TEXT = "text"
    TEXTAREA = "textarea"
    NUMBER = "number"
    BOOLEAN = "boolean"
    SELECT = "select"
    SEED = "seed"
    MEDIA = "media"  # a stored media reference: {"ref": "asset" | "take", "id": ...}


SEED_MAX = 2**63 - 1


@dataclass(frozen=True)
class ParamSpec:
    name: str
    widget: ParamWidget
    default: Any = None
    label: str | None = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    integer: bool = False  # NUMBER only: whole numbers
    max_length: int | None = None  # TEXT/TEXTAREA only
    options: tuple[str, ...] = ()  # SELECT with a fixed list
    options_from: str | None = None  # SELECT fed by a catalog category (a model picker)
    # A picker left empty picks no model (an optional one, e.g. a control model), rather than
    # one the server chooses: a run then needs nothing of that category.
    empty_picks_none: bool = False
    # A picker left empty lets the node find its part where it can (a VAE inside its model's
    # diffusers folder): a run then needs nothing of that category to be claimed.
    empty_found_anywhere: bool = False
    # More catalog categories whose names the picker takes (LTX-2's model: ComfyUI's all-in-one
    # files in checkpoints/ beside the folders in diffusion_models/).
    also_from: tuple[str, ...] = ()

    def categories(self) -> tuple[str, ...]:
        """The catalog categories a picker takes names from, its own first."""
        return () if self.options_from is None else (self.options_from, *self.also_from)

    def category_for(self, name: str, options: Callable[[str], Sequence[str]]) -> str | None:
        """The first of the picker's categories that lists `name` (None: a plain select)."""
        found = next((c for c in self.categories() if name in options(c)), None)
        return found or self.options_from

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "widget": self.widget.value,
            "label": self.label or self.name.replace("_", " ").capitalize(),
            "default": self.default,
            "required": self.required,
        }
        if self.minimum is not None:
            out["min"] = self.minimum
        if self.maximum is not None:
            out["max"] = self.maximum
        if self.step is not None:
            out["step"] = self.step
        if self.widget == ParamWidget.NUMBER:
            out["integer"] = self.integer
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if self.options:
            out["options"] = list(self.options)
        if self.options_from is not None:
            out["optionsFrom"] = self.options_from
        if self.empty_picks_none:
            out["emptyPicksNone"] = True
        return out


@dataclass(frozen=True)
class PortSpec:
    name: str
    kind: PortKind
    optional: bool = False
    multiple: bool = False  # accepts a list of edges (fan-in)
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "optional": self.optional,
            "multiple": self.multiple,
            "label": self.label or self.name.replace("_", " ").capitalize(),
        }


@dataclass(frozen=True)
class NodeDescriptor:
    type: str
    title: str
    category: str
    outputs: tuple[PortSpec, ...]
    inputs: tuple[PortSpec, ...] = ()
    params: tuple[ParamSpec, ...] = ()
    icon: str = "box"
    source: str = "core"
    output_kind: str | None = None  # the media kind of its takes, if it makes any
    hidden: bool = False
    # Set by the registry when the node cannot run here (e.g. an extra is not installed).
    unavailable_reason: str | None = None
    description: str = ""
    # The device kind a server needs to run it ("cuda", ...); None: any device will do.
    requires_device: str | None = None
    extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def input(self, name: str) -> PortSpec | None:
        return next((p for p in self.inputs if p.name == name), None)

    def output(self, name: str) -> PortSpec | None:
        return next((p for p in self.outputs if p.name == name), None)

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "title": self.title,
            "category": self.category,
            "icon": self.icon,
            "source": self.source,
            "outputKind": self.output_kind,
            "inputs": [p.to_json() for p in self.inputs],
            "outputs": [p.to_json() for p in self.outputs],
            "params": [p.to_json() for p in self.params],
            "available": self.unavailable_reason is None,
        }
        if self.description:
            out["description"] = self.description
        if self.hidden:
            out["hidden"] = True
        if self.unavailable_reason is not None:
            out["unavailableReason"] = self.unavailable_reason
        if self.requires_device is not None:
            out["requiresDevice"] = self.requires_device
        out.update(self.extra)
        return out
