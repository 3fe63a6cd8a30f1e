"""Read ComfyUI's UI workflow format (`nodes` + `links`) into the flat API-format model.

What the UI format adds, and what happens to it here:
- positional `widgets_values`: named with the widget order of each class we know (widgets.py);
- links as arrays `[id, origin, slot, target, slot, type]` or as objects: both read;
- subgraphs (`definitions.subgraphs`): a node whose `type` is a subgraph id is replaced by the
  subgraph's nodes, with ids `<instance>:<inner>` as ComfyUI runs them; the pseudo nodes -10 and -20
  are the subgraph's inputs and outputs; promoted widgets (`properties.proxyWidgets`, or widget
  values on the instance for widget-typed subgraph inputs) override the inner values;
- Reroute nodes are followed, PrimitiveNode values are copied into the widget they feed, notes are
  dropped, muted nodes are left out, bypassed nodes pass their inputs straight through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.errors import InvalidRequest
from inline_core.importer.widgets import (
    MODE_BYPASSED,
    MODE_MUTED,
    NOTE_TYPES,
    PRIMITIVE_NODE,
    REROUTE,
    SUBGRAPH_INPUT_ID,
    SUBGRAPH_OUTPUT_ID,
    widget_names,
)
from inline_core.importer.workflow import ComfyNode, Link, Skipped, Workflow, id_text, slot_index

MAX_SUBGRAPH_DEPTH = 32

JsonObj = Mapping[str, Any]


@dataclass(frozen=True)
class _Const:
    value: Any


Source = Link | _Const | None


@dataclass(frozen=True)
class _RawLink:
    origin: str
    origin_slot: int
    target: str
    target_slot: int
    type: str | None


@dataclass
class _Level:
    """One graph: the root, or a subgraph definition."""

    name: str
    nodes: dict[str, JsonObj]
    links: dict[int, _RawLink]
    inputs: list[JsonObj] = field(default_factory=list[JsonObj])  # subgraph input slots


@dataclass
class _Scope:
    """A level as instantiated: the root, or one subgraph instance (nested ones chain up)."""

    level: _Level
    prefix: str  # "" for the root, "57:" inside instance 57
    parent: _Scope | None = None
    instance: JsonObj | None = None  # the instance node, in the parent's level
    overrides: dict[tuple[str, str], Any] = field(default_factory=dict[tuple[str, str], Any])


def _obj(raw: object) -> JsonObj | None:
    return cast(JsonObj, raw) if isinstance(raw, Mapping) else None


def _list(raw: object) -> list[Any]:
    return cast(list[Any], raw) if isinstance(raw, list) else []


def _type_text(raw: object) -> str | None:
    return raw if isinstance(raw, str) else None


def _parse_link(raw: object, where: str) -> tuple[int, _RawLink] | None:
    if raw is None:
        return None
    fields: list[object]
    if isinstance(raw, list):
        fields = list(cast(list[object], raw))
        if len(fields) < 5:
            raise InvalidRequest(f"{where}: a link array needs [id, origin, slot, target, slot]")
        fields = fields[:6] + [None] * (6 - min(len(fields), 6))
    elif isinstance(raw, Mapping):
        obj = cast(JsonObj, raw)
        keys = ("id", "origin_id", "origin_slot", "target_id", "target_slot", "type")
        fields = [obj.get(k) for k in keys]
    else:
        raise InvalidRequest(f"{where}: a link must be an array or an object")
    link_id = slot_index(fields[0])
    origin, target = id_text(fields[1]), id_text(fields[3])
    origin_slot, target_slot = slot_index(fields[2]), slot_index(fields[4])
    if link_id is None or origin is None or target is None:
        raise InvalidRequest(f"{where}: a link needs a numeric id and origin and target node ids")
    if origin_slot is None or target_slot is None:
        raise InvalidRequest(f"{where}: link {link_id} has no valid slot numbers")
    return link_id, _RawLink(origin, origin_slot, target, target_slot, _type_text(fields[5]))


def _read_level(raw: JsonObj, name: str, where: str) -> _Level:
    raw_nodes = raw.get("nodes")
    if not isinstance(raw_nodes, list):
        raise InvalidRequest(f"{where}: 'nodes' must be a list")
    nodes: dict[str, JsonObj] = {}
    for index, item in enumerate(cast(list[object], raw_nodes)):
        node = _obj(item)
        node_id = id_text(node.get("id")) if node is not None else None
        if node is None or node_id is None:
            raise InvalidRequest(f"{where}: nodes[{index}] must be an object with an 'id'")
        if not isinstance(node.get("type"), str) or not node.get("type"):
            raise InvalidRequest(f"{where}: node {node_id} needs a 'type'")
        nodes[node_id] = node
    raw_links = raw.get("links", [])
    if raw_links is None:
        raw_links = []
    if not isinstance(raw_links, list):
        raise InvalidRequest(f"{where}: 'links' must be a list")
    links: dict[int, _RawLink] = {}
    for index, item in enumerate(cast(list[object], raw_links)):
        parsed = _parse_link(item, f"{where}: links[{index}]")
        if parsed is not None:
            links[parsed[0]] = parsed[1]
    inputs = [o for o in (_obj(i) for i in _list(raw.get("inputs"))) if o is not None]
    return _Level(name=name, nodes=nodes, links=links, inputs=inputs)


def _collect_definitions(raw: JsonObj, into: dict[str, _Level], depth: int = 0) -> None:
    """Subgraph definitions live in `definitions.subgraphs`, which may nest further."""
    if depth > MAX_SUBGRAPH_DEPTH:
        raise InvalidRequest("subgraph definitions nest too deeply")
    definitions = _obj(raw.get("definitions"))
    if definitions is None:
        return
    for index, item in enumerate(_list(definitions.get("subgraphs"))):
        sub = _obj(item)
        sub_id = sub.get("id") if sub is not None else None
        if sub is None or not isinstance(sub_id, str) or not sub_id:
            raise InvalidRequest(f"definitions.subgraphs[{index}] must be an object with an 'id'")
        name = sub.get("name")
        into[sub_id] = _read_level(
            sub, name if isinstance(name, str) and name else sub_id, f"subgraph {sub_id}"
        )
        _collect_definitions(sub, into, depth + 1)


def _mode(node: JsonObj) -> int:
    mode = node.get("mode", 0)
    return mode if isinstance(mode, int) and not isinstance(mode, bool) else 0


def _inputs(node: JsonObj) -> list[JsonObj]:
    return [o for o in (_obj(i) for i in _list(node.get("inputs"))) if o is not None]


def _outputs(node: JsonObj) -> list[JsonObj]:
    return [o for o in (_obj(i) for i in _list(node.get("outputs"))) if o is not None]


def _proxy_widgets(node: JsonObj) -> list[tuple[str, str]]:
    properties = _obj(node.get("properties")) or {}
    out: list[tuple[str, str]] = []
    for item in _list(properties.get("proxyWidgets")):
        entry = _list(item)
        if len(entry) >= 2 and id_text(entry[0]) is not None and isinstance(entry[1], str):
            out.append((str(id_text(entry[0])), entry[1]))
        else:
            out.append(("", ""))  # keeps the positions of later entries
    return out


def _types_match(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and (a == b or a == "*" or b == "*")


def _bypass_input(node: JsonObj, slot: int, want: str | None) -> int | None:
    """Which input a bypassed node passes to output `slot` (same index first, then same type)."""
    inputs, outputs = _inputs(node), _outputs(node)
    out_type = _type_text(outputs[slot].get("type")) if slot < len(outputs) else None
    wanted = want if want not in (None, "*") else out_type
    if slot < len(inputs) and _types_match(_type_text(inputs[slot].get("type")), wanted):
        return slot
    for index, entry in enumerate(inputs):
        if _types_match(_type_text(entry.get("type")), wanted):
            return index
    return None


class _Reader:
    def __init__(
        self, definitions: dict[str, _Level], widget_orders: Mapping[str, tuple[str, ...]]
    ) -> None:
        self.definitions = definitions
        self.widget_orders = widget_orders
        self.nodes: dict[str, ComfyNode] = {}
        self.skipped: list[Skipped] = []
        self._children: dict[str, _Scope] = {}

    # -- scopes ---------------------------------------------------------------------------

    def child(self, scope: _Scope, instance: JsonObj) -> _Scope:
        instance_id = str(id_text(instance.get("id")))
        prefix = f"{scope.prefix}{instance_id}:"
        known = self._children.get(prefix)
        if known is not None:
            return known
        if prefix.count(":") > MAX_SUBGRAPH_DEPTH:
            raise InvalidRequest(
                "subgraphs nest deeper than "
                f"{MAX_SUBGRAPH_DEPTH} levels (does a subgraph contain itself?)"
            )
        level = self.definitions[str(instance.get("type"))]
        values = _list(instance.get("widgets_values"))
        overrides: dict[tuple[str, str], Any] = {}
        for index, (inner_id, widget) in enumerate(_proxy_widgets(instance)):
            if not inner_id or inner_id == "-1" or index >= len(values):
                continue
            # A promotion from further out names this instance's widget: it wins.
            overrides[(inner_id, widget)] = scope.overrides.get(
                (instance_id, widget), values[index]
            )
        made = _Scope(level, prefix, scope, instance, overrides)
        self._children[prefix] = made
        return made

    # -- following links to their real source ----------------------------------------------

    def link_source(
        self, scope: _Scope, link_id: object, want: str | None, seen: set[str]
    ) -> Source:
        index = slot_index(link_id)
        link = scope.level.links.get(index) if index is not None else None
        if link is None:
            return None
        if link.origin == SUBGRAPH_INPUT_ID:
            return self.boundary_source(scope, link.origin_slot, seen)
        return self.output_source(scope, link.origin, link.origin_slot, want or link.type, seen)

    def input_source(
        self, scope: _Scope, node: JsonObj, index: int, want: str | None, seen: set[str]
    ) -> Source:
        inputs = _inputs(node)
        if index >= len(inputs) or inputs[index].get("link") is None:
            return None
        return self.link_source(scope, inputs[index].get("link"), want, seen)

    def output_source(
        self, scope: _Scope, node_id: str, slot: int, want: str | None, seen: set[str]
    ) -> Source:
        key = f"{scope.prefix}{node_id}>{slot}"
        if key in seen:  # a loop of reroutes or bypassed nodes
            return None
        seen.add(key)
        node = scope.level.nodes.get(node_id)
        if node is None:
            return None
        node_type = str(node.get("type"))
        mode = _mode(node)
        if mode == MODE_MUTED:
            return None
        if mode == MODE_BYPASSED:
            index = _bypass_input(node, slot, want)
            return None if index is None else self.input_source(scope, node, index, want, seen)
        if node_type == REROUTE:
            return self.input_source(scope, node, 0, want, seen)
        if node_type == PRIMITIVE_NODE:
            values = _list(node.get("widgets_values"))
            return _Const(values[0]) if values else None
        if node_type in self.definitions:
            inner = self.child(scope, node)
            for link_id, link in inner.level.links.items():
                if link.target == SUBGRAPH_OUTPUT_ID and link.target_slot == slot:
                    return self.link_source(inner, link_id, want, seen)
            return None
        return Link(f"{scope.prefix}{node_id}", slot)

    def boundary_source(self, scope: _Scope, slot: int, seen: set[str]) -> Source:
        """What feeds input `slot` of the subgraph that `scope` instantiates."""
        instance, parent = scope.instance, scope.parent
        if instance is None or parent is None or slot >= len(scope.level.inputs):
            return None
        name = scope.level.inputs[slot].get("name")
        entries = _inputs(instance)
        entry = next((e for e in entries if e.get("name") == name), None)
        if entry is None and slot < len(entries):
            # Renamed on the instance; never another input's entry (a frontend that lists only
            # the linked inputs on the instance shifts the others' slots).
            named = {i.get("name") for i in scope.level.inputs}
            entry = entries[slot] if entries[slot].get("name") not in named else None
        if entry is not None and entry.get("link") is not None:
            return self.link_source(parent, entry.get("link"), _type_text(entry.get("type")), seen)
        return self.promoted_value(scope, str(name))

    def promoted_value(self, scope: _Scope, name: str) -> Source:
        """A widget-typed subgraph input left unwired holds its value on the instance."""
        instance = scope.instance
        assert instance is not None
        values = _list(instance.get("widgets_values"))
        proxies = _proxy_widgets(instance)
        if proxies:
            for index, (inner_id, widget) in enumerate(proxies):
                if inner_id == "-1" and widget == name and index < len(values):
                    return _Const(values[index])
            return None
        widget_inputs = [str(e.get("name")) for e in _inputs(instance) if "widget" in e]
        by_links = self._widget_inputs_by_links(scope.level)
        # Some frontends list only a few of the promoted widgets on the instance while its
        # values hold them all, in the subgraph's input order (the Wan 2.2 14B i2v template).
        if not widget_inputs or (len(widget_inputs) != len(values) == len(by_links)):
            widget_inputs = by_links
        if name in widget_inputs and widget_inputs.index(name) < len(values):
            return _Const(values[widget_inputs.index(name)])
        return None

    @staticmethod
    def _widget_inputs_by_links(level: _Level) -> list[str]:
        """Subgraph inputs whose inner links end on a widget, in slot order."""
        names: list[str] = []
        for slot, spec in enumerate(level.inputs):
            for link_id, link in level.links.items():
                if link.origin != SUBGRAPH_INPUT_ID or link.origin_slot != slot:
                    continue
                target = level.nodes.get(link.target)
                if target is None:
                    continue
                entries = _inputs(target)
                hit = next((e for e in entries if e.get("link") == link_id), None)
                if hit is not None and "widget" in hit:
                    names.append(str(spec.get("name")))
                    break
        return names

    # -- flattening -----------------------------------------------------------------------

    def flatten(self, scope: _Scope) -> None:
        for node_id, node in scope.level.nodes.items():
            node_type = str(node.get("type"))
            if node_type in NOTE_TYPES or node_type in (REROUTE, PRIMITIVE_NODE):
                continue
            flat_id = f"{scope.prefix}{node_id}"
            shown = (
                f"subgraph {self.definitions[node_type].name!r}"
                if node_type in self.definitions
                else node_type
            )
            mode = _mode(node)
            if mode == MODE_MUTED:
                self.skipped.append(Skipped(flat_id, shown, "muted in the workflow"))
                continue
            if mode == MODE_BYPASSED:
                reason = "bypassed in the workflow: its inputs pass straight through"
                self.skipped.append(Skipped(flat_id, shown, reason))
                continue
            if node_type in self.definitions:
                self.flatten(self.child(scope, node))
                continue
            self.nodes[flat_id] = self.read_node(scope, node_id, node)

    def read_node(self, scope: _Scope, node_id: str, node: JsonObj) -> ComfyNode:
        node_type = str(node.get("type"))
        inputs: dict[str, Any] = {}
        raw_values = node.get("widgets_values")
        if isinstance(raw_values, Mapping):
            inputs.update({str(k): v for k, v in cast(JsonObj, raw_values).items()})
        else:
            values = _list(raw_values)
            names = widget_names(node_type, len(values), self.widget_orders)
            if names is not None:
                inputs.update(zip(names, values, strict=False))
        for (inner_id, widget), value in scope.overrides.items():
            if inner_id == node_id:
                inputs[widget] = value
        for entry in _inputs(node):
            name = entry.get("name")
            if not isinstance(name, str) or entry.get("link") is None:
                continue
            want = _type_text(entry.get("type"))
            source = self.link_source(scope, entry.get("link"), want, set())
            if isinstance(source, Link):
                inputs[name] = source
            elif isinstance(source, _Const):
                inputs[name] = source.value
            # An unresolved wire leaves a widget's own value in place, and no input otherwise.
        output_types = tuple(str(_type_text(o.get("type")) or "*") for o in _outputs(node))
        title = node.get("title")
        return ComfyNode(
            id=f"{scope.prefix}{node_id}",
            class_type=node_type,
            inputs=inputs,
            title=title if isinstance(title, str) else None,
            output_types=output_types,
        )


def read_ui(raw: JsonObj, widget_orders: Mapping[str, tuple[str, ...]] | None = None) -> Workflow:
    """Read the UI workflow format into the flat model (`widget_orders`: those of classes that
    served nodes declare, beyond the ones `widgets.py` knows)."""
    definitions: dict[str, _Level] = {}
    _collect_definitions(raw, definitions)
    root = _read_level(raw, "workflow", "workflow")
    if not root.nodes:
        raise InvalidRequest("the workflow has no nodes")
    reader = _Reader(definitions, widget_orders or {})
    reader.flatten(_Scope(root, ""))
    return Workflow(nodes=reader.nodes, format="ui", skipped=reader.skipped)
