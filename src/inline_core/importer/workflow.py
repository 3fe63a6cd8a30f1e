"""A ComfyUI workflow read into one flat shape, whichever format it came in.

Both of ComfyUI's formats end up as the API format's model: nodes with a class and named inputs,
each input a literal or a `Link` to another node's output slot. The UI format's extras (subgraphs,
reroutes, primitive nodes, bypassed nodes) are resolved by `ui_format.py` before this point.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.errors import InvalidRequest


@dataclass(frozen=True)
class Link:
    """An input wired to output `slot` of node `node`."""

    node: str
    slot: int


@dataclass
class ComfyNode:
    id: str  # "9"; a node inside subgraph instance 57 is "57:9", as ComfyUI runs it
    class_type: str
    inputs: dict[str, Any]  # name -> literal or Link
    title: str | None = None
    output_types: tuple[str, ...] | None = None  # written by the UI format only


@dataclass(frozen=True)
class Skipped:
    node_id: str
    class_type: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"nodeId": self.node_id, "classType": self.class_type, "reason": self.reason}


@dataclass
class Workflow:
    nodes: dict[str, ComfyNode]
    format: str  # "api" | "ui"
    skipped: list[Skipped] = field(default_factory=list[Skipped])


def node_sort_key(node_id: str) -> tuple[tuple[int, int, str], ...]:
    """Numeric order for ComfyUI ids ("9" < "10" < "57:3"), text order for anything else."""
    return tuple(
        (0, int(part), "") if part.isdecimal() else (1, 0, part) for part in node_id.split(":")
    )


def id_text(raw: object) -> str | None:
    """A node id as text: ComfyUI writes ints, group nodes and API files write strings."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, str) and raw:
        return raw
    return None


def slot_index(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"\d+", raw):
        return int(raw)
    return None


def _api_input(value: object) -> object:
    """`[node_id, slot]` is a link; `{"__value__": [...]}` is how the API format escapes a list."""
    if isinstance(value, list):
        items = cast(list[object], value)
        if len(items) == 2:
            source, slot = id_text(items[0]), slot_index(items[1])
            if source is not None and slot is not None:
                return Link(source, slot)
        return items
    if isinstance(value, Mapping):
        obj = cast(Mapping[str, object], value)
        if set(obj) == {"__value__"}:
            return obj["__value__"]
        return obj
    return value


def read_api(prompt: Mapping[str, object]) -> Workflow:
    """Read the API/prompt format: `{id: {"class_type", "inputs", "_meta"?}}`."""
    if not prompt:
        raise InvalidRequest("the workflow has no nodes")
    nodes: dict[str, ComfyNode] = {}
    for key, raw in prompt.items():
        node_id = id_text(key)
        if node_id is None or not isinstance(raw, Mapping):
            raise InvalidRequest(
                f"not a ComfyUI workflow: entry {key!r} is not a node object; expected the API "
                "format {id: {class_type, inputs}} or the UI format {nodes, links}"
            )
        obj = cast(Mapping[str, object], raw)
        class_type = obj.get("class_type")
        if not isinstance(class_type, str) or not class_type:
            raise InvalidRequest(f"node {node_id}: 'class_type' must be a non-empty string")
        raw_inputs = obj.get("inputs", {})
        if raw_inputs is None:
            raw_inputs = {}
        if not isinstance(raw_inputs, Mapping):
            raise InvalidRequest(f"node {node_id}: 'inputs' must be an object")
        inputs = {
            str(name): _api_input(value)
            for name, value in cast(Mapping[object, object], raw_inputs).items()
        }
        meta = obj.get("_meta")
        title: str | None = None
        if isinstance(meta, Mapping):
            raw_title = cast(Mapping[str, object], meta).get("title")
            title = raw_title if isinstance(raw_title, str) else None
        nodes[node_id] = ComfyNode(node_id, class_type, inputs, title)
    return Workflow(nodes=nodes, format="api")
