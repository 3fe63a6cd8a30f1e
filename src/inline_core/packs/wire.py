"""A pack node's declaration (the SDK's wire form) mapped onto the server's own `NodeDescriptor`.

The SDK writes ports and params with the server's names; this is the one place they are read back,
strictly: an unknown kind or widget, a missing name or a default its own range refuses makes the
pack malformed, at install and again at start. Once mapped, a pack node is checked at submit by
the same code as every built-in node (`graph/params.py`, `graph/validate.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from inline_core.errors import InvalidGraph
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.params import normalize_params
from inline_core.graph.schema import PortKind
from inline_core.packs.errors import PackRefused
from inline_core.packs.manifest import PackManifest

PACK_PORT_KINDS = frozenset(
    {
        PortKind.IMAGE,
        PortKind.IMAGES,
        PortKind.MASK,
        PortKind.VIDEO,
        PortKind.AUDIO,
        PortKind.TEXT,
        PortKind.NUMBER,
    }
)
# A pack gets its values through its inputs: no stored-media or model-picker params.
PACK_WIDGETS = frozenset(ParamWidget) - {ParamWidget.MEDIA}
MEDIA_KINDS = {PortKind.IMAGE: "image", PortKind.MASK: "image", PortKind.VIDEO: "video",
               PortKind.AUDIO: "audio"}


@dataclass(frozen=True)
class ComfyMapping:
    """A ComfyUI class a pack node stands in for (the importer maps it onto the node)."""

    class_name: str
    inputs: Mapping[str, str] = field(default_factory=dict[str, str])  # comfy name -> port
    params: Mapping[str, str] = field(default_factory=dict[str, str])  # comfy name -> param
    widgets: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.class_name,
            "inputs": dict(self.inputs),
            "params": dict(self.params),
            "widgets": list(self.widgets),
        }


@dataclass(frozen=True)
class PackNode:
    pack: str
    node: str  # its name inside the pack
    descriptor: NodeDescriptor
    cacheable: bool = True
    saves_takes: bool = True
    comfy: ComfyMapping | None = None


class _NoCatalog:
    """Pack params have no model pickers, so checking their defaults needs no catalog."""

    def options(self, category: str) -> list[str]:
        return []

    def identity(self, category: str, name: str) -> str:
        return ""

    def path(self, category: str, name: str) -> Path:
        raise KeyError(category)


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, problem: str) -> PackRefused:
        return PackRefused(f"{self.where}: {problem}")

    def obj(self, raw: object, what: str) -> Mapping[str, Any]:
        if not isinstance(raw, Mapping):
            raise self.fail(f"{what} must be an object")
        return cast(Mapping[str, Any], raw)

    def items(self, raw: object, what: str) -> list[Mapping[str, Any]]:
        if not isinstance(raw, list):
            raise self.fail(f"{what} must be a list")
        return [self.obj(item, f"{what}[{i}]") for i, item in enumerate(cast(list[object], raw))]

    def text(self, obj: Mapping[str, Any], key: str, default: str | None = None) -> str:
        value = obj.get(key, default)
        if not isinstance(value, str) or (default is None and not value):
            raise self.fail(f"{key!r} must be a non-empty string, got {value!r}")
        return value

    def number(self, obj: Mapping[str, Any], key: str) -> float | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{key!r} must be a number, got {value!r}")
        return float(value)

    def flag(self, obj: Mapping[str, Any], key: str, default: bool) -> bool:
        value = obj.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{key!r} must be true or false, got {value!r}")
        return value

    def names(self, raw: object, what: str) -> dict[str, str]:
        mapping = self.obj(raw if raw is not None else {}, what)
        if not all(isinstance(v, str) for v in mapping.values()):
            raise self.fail(f"{what} must map names to names")
        return {str(k): str(v) for k, v in mapping.items()}

    def port(self, raw: Mapping[str, Any]) -> PortSpec:
        name = self.text(raw, "name")
        kind = next((k for k in PACK_PORT_KINDS if k.value == raw.get("kind")), None)
        if kind is None:
            known = ", ".join(sorted(k.value for k in PACK_PORT_KINDS))
            raise self.fail(f"port {name!r} has kind {raw.get('kind')!r}; a pack uses {known}")
        return PortSpec(
            name,
            kind,
            optional=self.flag(raw, "optional", False),
            multiple=self.flag(raw, "multiple", False),
            label=cast(str | None, raw.get("label")) if isinstance(raw.get("label"), str) else None,
        )

    def param(self, raw: Mapping[str, Any]) -> ParamSpec:
        name = self.text(raw, "name")
        widget = next((w for w in PACK_WIDGETS if w.value == raw.get("widget")), None)
        if widget is None:
            known = ", ".join(sorted(w.value for w in PACK_WIDGETS))
            raise self.fail(f"param {name!r} has widget {raw.get('widget')!r}; a pack uses {known}")
        options = raw.get("options", [])
        if not isinstance(options, list) or not all(
            isinstance(o, str) for o in cast(list[object], options)
        ):
            raise self.fail(f"param {name!r}: 'options' must be a list of strings")
        max_length = self.number(raw, "maxLength")
        label = raw.get("label")
        return ParamSpec(
            name,
            widget,
            default=raw.get("default"),
            label=label if isinstance(label, str) else None,
            required=self.flag(raw, "required", False),
            minimum=self.number(raw, "min"),
            maximum=self.number(raw, "max"),
            step=self.number(raw, "step"),
            integer=self.flag(raw, "integer", False),
            max_length=int(max_length) if max_length is not None else None,
            options=tuple(cast(list[str], options)),
        )

    def comfy(self, raw: object) -> ComfyMapping | None:
        if raw is None:
            return None
        obj = self.obj(raw, "comfy")
        widgets = obj.get("widgets", [])
        if not isinstance(widgets, list) or not all(
            isinstance(w, str) for w in cast(list[object], widgets)
        ):
            raise self.fail("comfy.widgets must be a list of names")
        return ComfyMapping(
            class_name=self.text(obj, "class"),
            inputs=self.names(obj.get("inputs"), "comfy.inputs"),
            params=self.names(obj.get("params"), "comfy.params"),
            widgets=tuple(cast(list[str], widgets)),
        )


def _unique(reader: _Reader, names: list[str], what: str) -> None:
    if len(set(names)) != len(names):
        raise reader.fail(f"two {what} share a name")


def pack_node(manifest: PackManifest, node: str, raw: object) -> PackNode:
    """Map one node's wire declaration; raises `PackRefused` naming what is wrong."""
    node_type = manifest.node_type(node)
    reader = _Reader(f"pack {manifest.name!r} node {node!r}")
    obj = reader.obj(raw, "the declaration")
    inputs = tuple(reader.port(p) for p in reader.items(obj.get("inputs", []), "inputs"))
    outputs = tuple(reader.port(p) for p in reader.items(obj.get("outputs", []), "outputs"))
    params = tuple(reader.param(p) for p in reader.items(obj.get("params", []), "params"))
    if not outputs:
        raise reader.fail("a node needs at least one output")
    _unique(reader, [p.name for p in inputs], "inputs")
    _unique(reader, [p.name for p in outputs], "outputs")
    _unique(reader, [p.name for p in params], "params")
    saves_takes = reader.flag(obj, "savesTakes", True)
    comfy = reader.comfy(obj.get("comfy"))
    extra: dict[str, Any] = {"pack": {"name": manifest.name, "version": manifest.version}}
    if comfy is not None:  # served with the node, and what the ComfyUI importer maps by
        extra["comfy"] = comfy.to_json()
    media = [MEDIA_KINDS[p.kind] for p in outputs if p.kind in MEDIA_KINDS]
    descriptor = NodeDescriptor(
        type=node_type,
        title=reader.text(obj, "title"),
        category=reader.text(obj, "category", "pack"),
        icon=reader.text(obj, "icon", "box"),
        description=reader.text(obj, "description", ""),
        inputs=inputs,
        outputs=outputs,
        params=params,
        source=manifest.name,
        output_kind=media[0] if media and saves_takes else None,
        extra=extra,
    )
    try:  # every default must pass the checks a client's value will
        normalize_params(descriptor, node_type, {}, _NoCatalog())
    except InvalidGraph as exc:
        raise reader.fail(f"a default is refused by its own declaration: {exc.message}") from exc
    return PackNode(
        pack=manifest.name,
        node=node,
        descriptor=descriptor,
        cacheable=reader.flag(obj, "cacheable", True),
        saves_takes=saves_takes,
        comfy=comfy,
    )


def pack_nodes(manifest: PackManifest, described: Mapping[str, Any]) -> dict[str, PackNode]:
    """Every node of a pack's `describe` answer, which must be exactly the manifest's nodes."""
    raw_nodes = described.get("nodes")
    if not isinstance(raw_nodes, Mapping):
        raise PackRefused(f"pack {manifest.name!r}: its description lists no nodes")
    nodes = cast(Mapping[str, object], raw_nodes)
    if set(nodes) != set(manifest.nodes):
        raise PackRefused(
            f"pack {manifest.name!r}: its code declares {sorted(nodes)}, its manifest "
            f"{sorted(manifest.nodes)}"
        )
    return {name: pack_node(manifest, name, nodes[name]) for name in sorted(nodes)}
