"""The typed graph: port kinds, nodes, edges, and the JSON parser.

A graph is `{"schemaVersion": 1, "nodes": [{"id", "type", "params", "inputs"}]}` where each input is
`{"from": <node id>, "output": <port>}` or a list of them. The target is not part of the graph.
Every malformed shape raises `InvalidGraph` naming the node it found it in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from inline_core.errors import InvalidGraph

SCHEMA_VERSION_MIN = 1
SCHEMA_VERSION_MAX = 1
# Bounds on every part of a graph a client writes (the node count is the caller's `max_nodes`).
MAX_ID_LENGTH = 128  # node ids, port names, edge ends
MAX_TYPE_LENGTH = 200
MAX_EDGES_PER_NODE = 256  # over all of a node's input ports
MAX_PARAMS_PER_NODE = 256
EDGES_PER_NODE_IN_GRAPH = 8  # a whole graph holds at most this many edges per node on average
GRAPH_KEYS = frozenset({"schemaVersion", "nodes", "meta"})
NODE_KEYS = frozenset({"id", "type", "params", "inputs", "title", "position", "meta"})
_LISTED = 10


def _names(names: set[str]) -> str:
    """Some of a client's key names for an error message (never all of a hostile list)."""
    shown = sorted(names)[:_LISTED]
    listed = ", ".join(repr(n[:MAX_ID_LENGTH]) for n in shown)
    more = len(names) - len(shown)
    return f"[{listed}, ... {more} more]" if more else f"[{listed}]"


def _short(name: str) -> bool:
    return 0 < len(name) <= MAX_ID_LENGTH


class PortKind(StrEnum):
    IMAGE = "image"
    IMAGES = "image[]"
    VIDEO = "video"
    AUDIO = "audio"
    TEXT = "text"
    NUMBER = "number"
    MASK = "mask"
    MODEL = "model"
    VAE = "vae"
    TEXT_ENCODER = "text-encoder"
    CONDITIONING = "conditioning"
    LATENT = "latent"
    LORA = "lora"


# Output kind -> input kinds it may feed besides its own: an image is a one-image list and a
# one-frame video (the executor wraps it, `executor._gather_inputs`), and a mask read by its
# luminance (the node taking it converts it, `mask_nodes.mask_value`).
_COERCIONS: dict[PortKind, frozenset[PortKind]] = {
    PortKind.IMAGE: frozenset({PortKind.IMAGES, PortKind.VIDEO, PortKind.MASK}),
}


def port_satisfies(output: PortKind, input_kind: PortKind) -> bool:
    """Whether an output of kind `output` may be wired into an input of kind `input_kind`."""
    return output == input_kind or input_kind in _COERCIONS.get(output, frozenset())


@dataclass(frozen=True)
class Edge:
    source: str  # the upstream node id ("from" in JSON)
    output: str  # the upstream node's output port

    def to_json(self) -> dict[str, str]:
        return {"from": self.source, "output": self.output}


@dataclass(frozen=True)
class Node:
    id: str
    type: str
    params: Mapping[str, Any] = field(default_factory=dict[str, Any])
    # port -> edges; a port written as a single edge in JSON holds a one-element tuple
    inputs: Mapping[str, tuple[Edge, ...]] = field(default_factory=dict[str, tuple[Edge, ...]])
    # ports written as a list in JSON (so they serialize back the same way)
    list_inputs: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        for port, edges in self.inputs.items():
            if port in self.list_inputs:
                inputs[port] = [e.to_json() for e in edges]
            else:
                inputs[port] = edges[0].to_json()
        return {"id": self.id, "type": self.type, "params": dict(self.params), "inputs": inputs}


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    schema_version: int = SCHEMA_VERSION_MAX
    # What a client keeps with the graph (never read by a node): stored with the run and carried
    # in its takes, e.g. the ComfyUI prompt a run came from.
    meta: Mapping[str, Any] | None = None

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def by_id(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schemaVersion": self.schema_version,
            "nodes": [n.to_json() for n in self.nodes],
        }
        if self.meta is not None:
            out["meta"] = dict(self.meta)
        return out


def _edge(raw: object, node_id: str, port: str) -> Edge:
    if not isinstance(raw, Mapping):
        raise InvalidGraph(
            f"input {port!r} must be an edge {{'from', 'output'}} or a list of edges",
            node_id=node_id,
        )
    edge = cast(Mapping[str, object], raw)
    source, output = edge.get("from"), edge.get("output")
    if not isinstance(source, str) or not _short(source):
        raise InvalidGraph(f"input {port!r}: 'from' must be a node id", node_id=node_id)
    if not isinstance(output, str) or not _short(output):
        raise InvalidGraph(f"input {port!r}: 'output' must be a port name", node_id=node_id)
    extra = set(edge) - {"from", "output"}
    if extra:
        raise InvalidGraph(f"input {port!r}: unknown edge keys {_names(extra)}", node_id=node_id)
    return Edge(source, output)


def _node(raw: object, index: int) -> Node:
    if not isinstance(raw, Mapping):
        raise InvalidGraph(f"nodes[{index}] must be an object")
    obj = cast(Mapping[str, object], raw)
    node_id = obj.get("id")
    if not isinstance(node_id, str) or not node_id or len(node_id) > MAX_ID_LENGTH:
        raise InvalidGraph(
            f"nodes[{index}].id must be a non-empty string of at most {MAX_ID_LENGTH} characters"
        )
    node_type = obj.get("type")
    if not isinstance(node_type, str) or not node_type or len(node_type) > MAX_TYPE_LENGTH:
        raise InvalidGraph(
            f"'type' must be a non-empty string of at most {MAX_TYPE_LENGTH} characters",
            node_id=node_id,
        )
    params = obj.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise InvalidGraph("'params' must be an object", node_id=node_id)
    if len(cast(Mapping[str, object], params)) > MAX_PARAMS_PER_NODE:
        raise InvalidGraph(f"more than {MAX_PARAMS_PER_NODE} params", node_id=node_id)
    raw_inputs = obj.get("inputs", {})
    if raw_inputs is None:
        raw_inputs = {}
    if not isinstance(raw_inputs, Mapping):
        raise InvalidGraph("'inputs' must be an object", node_id=node_id)
    extra = set(obj) - NODE_KEYS
    if extra:
        raise InvalidGraph(f"unknown node keys {_names(extra)}", node_id=node_id)
    inputs: dict[str, tuple[Edge, ...]] = {}
    list_inputs: set[str] = set()
    edge_count = 0
    for port, value in cast(Mapping[object, object], raw_inputs).items():
        if not isinstance(port, str) or not _short(port):
            raise InvalidGraph(
                f"input port names must be non-empty strings of at most {MAX_ID_LENGTH} characters",
                node_id=node_id,
            )
        items = cast(list[object], value) if isinstance(value, list) else [value]
        edge_count += len(items)
        if edge_count > MAX_EDGES_PER_NODE:
            raise InvalidGraph(f"more than {MAX_EDGES_PER_NODE} input edges", node_id=node_id)
        if isinstance(value, list):
            if not items:
                raise InvalidGraph(f"input {port!r} is an empty list of edges", node_id=node_id)
            inputs[port] = tuple(_edge(e, node_id, port) for e in items)
            list_inputs.add(port)
        else:
            inputs[port] = (_edge(value, node_id, port),)
    return Node(
        id=node_id,
        type=node_type,
        params=dict(cast(Mapping[str, Any], params)),
        inputs=inputs,
        list_inputs=frozenset(list_inputs),
    )


def parse_graph(raw: object, *, max_nodes: int | None = None) -> Graph:
    """Parse a graph's JSON value. Raises `InvalidGraph` for any malformed shape."""
    if not isinstance(raw, Mapping):
        raise InvalidGraph("graph must be an object with 'schemaVersion' and 'nodes'")
    obj = cast(Mapping[str, object], raw)
    extra = set(obj) - GRAPH_KEYS
    if extra:
        raise InvalidGraph(f"unknown graph keys {_names(extra)} (a graph is schemaVersion, nodes)")
    version = obj.get("schemaVersion", SCHEMA_VERSION_MAX)
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidGraph("'schemaVersion' must be an integer")
    if not SCHEMA_VERSION_MIN <= version <= SCHEMA_VERSION_MAX:
        raise InvalidGraph(
            f"schemaVersion {version} is not supported "
            f"(this server reads {SCHEMA_VERSION_MIN}..{SCHEMA_VERSION_MAX})"
        )
    raw_nodes = obj.get("nodes")
    if not isinstance(raw_nodes, list):
        raise InvalidGraph("'nodes' must be a list")
    node_list = cast(list[object], raw_nodes)
    if not node_list:
        raise InvalidGraph("graph has no nodes")
    if max_nodes is not None and len(node_list) > max_nodes:
        raise InvalidGraph(f"graph has {len(node_list)} nodes; the limit is {max_nodes}")
    nodes = tuple(_node(n, i) for i, n in enumerate(node_list))
    edges = sum(len(e) for n in nodes for e in n.inputs.values())
    edge_limit = EDGES_PER_NODE_IN_GRAPH * max(len(nodes), 16)
    if edges > edge_limit:
        raise InvalidGraph(
            f"graph has {edges} edges; the limit for {len(nodes)} nodes is {edge_limit}"
        )
    seen: set[str] = set()
    for n in nodes:
        if n.id in seen:
            raise InvalidGraph("duplicate node id", node_id=n.id)
        seen.add(n.id)
    meta = obj.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        raise InvalidGraph("'meta' must be an object")
    kept = None if meta is None else dict(cast(Mapping[str, Any], meta))
    return Graph(nodes=nodes, schema_version=version, meta=kept)
