"""Graph ordering: the target's upstream closure and a stable topological order of it.

"Stable" means the order depends only on the graph's edges and the order its nodes were written in:
among nodes that are ready at the same time, the one that appears first in `graph.nodes` runs first.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection

from inline_core.errors import InvalidGraph, InvalidRequest
from inline_core.graph.schema import Graph, Node


def upstream_closure(graph: Graph, target: str) -> set[str]:
    """The target and every node it reads from, directly or not."""
    by_id = graph.by_id
    if target not in by_id:
        raise InvalidRequest(f"target {target!r} is not a node of the graph")
    seen: set[str] = {target}
    stack = [target]
    while stack:
        node = by_id[stack.pop()]
        for port, edges in node.inputs.items():
            for edge in edges:
                if edge.source not in by_id:
                    raise InvalidGraph(
                        f"input {port!r} comes from missing node {edge.source!r}", node_id=node.id
                    )
                if edge.source not in seen:
                    seen.add(edge.source)
                    stack.append(edge.source)
    return seen


def _sources(node: Node) -> set[str]:
    return {edge.source for edges in node.inputs.values() for edge in edges}


def topological_order(graph: Graph, node_ids: Collection[str]) -> tuple[str, ...]:
    """Order `node_ids` so every node comes after the nodes it reads from (Kahn's algorithm).

    Edges from nodes outside `node_ids` are ignored. Raises `InvalidGraph` naming a node on a cycle.
    """
    wanted = set(node_ids)
    position = {n.id: i for i, n in enumerate(graph.nodes) if n.id in wanted}
    nodes = [n for n in graph.nodes if n.id in wanted]
    blocking: dict[str, int] = {}  # node -> upstream nodes not yet ordered
    readers: dict[str, list[str]] = {n.id: [] for n in nodes}
    for n in nodes:
        upstream = _sources(n) & wanted
        blocking[n.id] = len(upstream)
        for source in upstream:
            readers[source].append(n.id)
    ready = [position[n.id] for n in nodes if blocking[n.id] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node_id = graph.nodes[heapq.heappop(ready)].id
        order.append(node_id)
        for reader in readers[node_id]:
            blocking[reader] -= 1
            if blocking[reader] == 0:
                heapq.heappush(ready, position[reader])
    if len(order) < len(nodes):
        left = {n.id for n in nodes} - set(order)
        cycle = _find_cycle(graph, left)
        raise InvalidGraph("graph has a cycle: " + " -> ".join(cycle), node_id=cycle[0])
    return tuple(order)


def _find_cycle(graph: Graph, left: set[str]) -> list[str]:
    """A cycle among `left` (nodes Kahn could not order), as a path that returns to its start.

    Every node left over has an unordered upstream node, so walking upstream never gets stuck and
    must revisit a node; the walk from that node on is the cycle. Returned in data-flow order.
    """
    by_id = graph.by_id
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    current = min(left, key=position.__getitem__)
    path: list[str] = []
    index: dict[str, int] = {}
    while current not in index:
        index[current] = len(path)
        path.append(current)
        current = min((s for s in _sources(by_id[current]) if s in left), key=position.__getitem__)
    cycle = [*path[index[current] :], current]
    cycle.reverse()
    return cycle
