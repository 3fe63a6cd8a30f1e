"""Declaring a node: its ports, its params, and the class that runs it.

    class Invert(Node):
        title = "Invert"
        inputs = (Port("image", "image"),)
        outputs = (Port("image", "image"),)
        params = (Param.number("amount", 1.0, minimum=0.0, maximum=1.0),)

        def run(self, call: Call) -> Outputs:
            ...

`Node.describe()` gives the wire form the server reads at install and maps onto its own node
descriptors, so a pack node is validated exactly as a built-in node is: the server checks params
and edges at submit, before the pack's process is ever started.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from inline_core_sdk.kinds import PortKindName, WidgetName

if TYPE_CHECKING:
    from inline_core_sdk.call import Call

Outputs = Mapping[str, object]


@dataclass(frozen=True)
class Port:
    name: str
    kind: PortKindName
    optional: bool = False
    multiple: bool = False  # accepts several edges (fan-in): the node gets a list
    label: str | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "optional": self.optional,
            "multiple": self.multiple,
        }
        if self.label is not None:
            out["label"] = self.label
        return out


def _given(**constraints: Any) -> dict[str, Any]:
    return {name: value for name, value in constraints.items() if value is not None}


@dataclass(frozen=True)
class Param:
    """A param, kept in its wire form: the server reads `constraints` (min, max, step, integer,
    maxLength, options, label, required) with its own param rules, so a value is checked exactly
    as a built-in node's is. Make one with the builders below."""

    name: str
    widget: WidgetName
    default: Any = None
    constraints: Mapping[str, Any] = field(default_factory=dict[str, Any])

    @classmethod
    def number(
        cls,
        name: str,
        default: float,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        step: float | None = None,
        integer: bool = False,
        label: str | None = None,
    ) -> Param:
        limits = _given(min=minimum, max=maximum, step=step, label=label)
        return cls(name, "number", default, {**limits, "integer": integer})

    @classmethod
    def text(
        cls, name: str, default: str = "", *, multiline: bool = False, max_length: int | None = None
    ) -> Param:
        return cls(name, "textarea" if multiline else "text", default, _given(maxLength=max_length))

    @classmethod
    def select(cls, name: str, options: tuple[str, ...], default: str | None = None) -> Param:
        chosen = default if default is not None else options[0]
        return cls(name, "select", chosen, {"options": list(options)})

    @classmethod
    def boolean(cls, name: str, default: bool = False) -> Param:
        return cls(name, "boolean", default)

    @classmethod
    def seed(cls, name: str = "seed") -> Param:
        return cls(name, "seed", -1)  # -1: the server draws one and records it with the run

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "widget": self.widget, "default": self.default,
                **self.constraints}


@dataclass(frozen=True)
class ComfyClass:
    """A ComfyUI node class this node stands in for, so the server's importer maps it here.

    `inputs` and `params` rename ComfyUI input names onto this node's ports and params (names
    that match need no entry); `widgets` is the class's widget order, for UI-format workflows.
    """

    name: str
    inputs: Mapping[str, str] | None = None
    params: Mapping[str, str] | None = None
    widgets: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {
            "class": self.name,
            "inputs": dict(self.inputs or {}),
            "params": dict(self.params or {}),
            "widgets": list(self.widgets),
        }


class Node(ABC):
    """Base of every pack node: the declaration as class attributes, the behaviour as `run`."""

    title: ClassVar[str] = ""
    category: ClassVar[str] = "pack"
    description: ClassVar[str] = ""
    icon: ClassVar[str] = "box"
    inputs: ClassVar[tuple[Port, ...]] = ()
    outputs: ClassVar[tuple[Port, ...]] = ()
    params: ClassVar[tuple[Param, ...]] = ()
    comfy: ClassVar[ComfyClass | None] = None
    # False for nodes whose output must never be reused across runs (a clock, a web call).
    cacheable: ClassVar[bool] = True
    # Media outputs (image, mask, video, audio) become takes unless this is False.
    saves_takes: ClassVar[bool] = True

    @abstractmethod
    def run(self, call: Call) -> Outputs:
        """Compute every declared output from `call.params` and `call.inputs`."""

    @classmethod
    def describe(cls) -> dict[str, Any]:
        out: dict[str, Any] = {
            "title": cls.title or cls.__name__,
            "category": cls.category,
            "description": cls.description,
            "icon": cls.icon,
            "inputs": [p.describe() for p in cls.inputs],
            "outputs": [p.describe() for p in cls.outputs],
            "params": [p.describe() for p in cls.params],
            "cacheable": cls.cacheable,
            "savesTakes": cls.saves_takes,
        }
        if cls.comfy is not None:
            out["comfy"] = cls.comfy.describe()
        return out
