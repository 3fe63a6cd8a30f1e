"""Submit-time validation: is this graph well formed, well typed and runnable for this target?

Structure (node types, ports, edges, kinds, fan-in, cycles) is checked for the whole graph. Params,
required inputs and runner readiness are checked only for the target's upstream closure: a client's
graph may hold nodes it is not running now, and those must not block this run. Every error names
the node it is about.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import cast

from inline_core.errors import InlineError, InvalidGraph, InvalidRequest, ModelMissing
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.needs import fit_to_consumers
from inline_core.graph.params import (
    PickerOrder,
    no_picker_order,
    normalize_params,
    resolve_seeds,
)
from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView, NodeRunner, SubmitFacts
from inline_core.graph.schema import Graph, Node, port_satisfies
from inline_core.graph.topo import topological_order, upstream_closure

__all__ = [
    "ValidatedGraph",
    "may_wait_on_disk",
    "normalize_params",
    "runner_for",
    "validate_graph",
]


@dataclass(frozen=True)
class ValidatedGraph:
    # Params normalised: defaults merged, types coerced, seeds resolved (closure nodes only).
    graph: Graph
    target: str
    # The target's upstream closure in a stable topological order.
    order: tuple[str, ...]
    # Every node's descriptor, and each closure node's runner: the registry's, looked up once
    # per graph shape (`_shape_facts`), so the run reads them here.
    descriptors: Mapping[str, NodeDescriptor]
    runners: Mapping[str, NodeRunner]
    # What each runner's submit-time check found (e.g. the files a model node resolved), handed
    # back to that runner when the node runs, so a run resolves its files once.
    prepared: Mapping[str, object] = field(default_factory=dict[str, object])


@dataclass(frozen=True)
class ShapeFacts:
    """What a graph's shape (its node ids, types and edges, in order, and the target) decides
    against the registry, whatever its params: every node's descriptor, the structure checked
    (ports, kinds, fan-in, no cycle), the target's closure in order and its runners (None: the
    type has none here, refused where `runner_for` refuses it)."""

    descriptors: Mapping[str, NodeDescriptor]
    order: tuple[str, ...]
    runners: Mapping[str, NodeRunner | None]
    # Whether some runner of the closure says what it needs of its inputs or cuts what it
    # prepared to its consumers' needs (`graph/needs.py`); where none does, fitting keeps every
    # prepared value as it is, so it is skipped.
    fits: bool


# Graph shapes (and node type sets) whose facts are kept in `Registry.derived`, most recently
# used last: a client posting new shapes without end pushes the oldest out.
SHAPES_KEPT = 256


def _shape_facts(graph: Graph, target: str, registry: Registry) -> ShapeFacts:
    """`ShapeFacts` of `graph`, checked once per shape and registry state: a graph posted again
    with other params (a new seed, a new prompt) reads them back; only a shape that passed is
    kept, so a bad one is refused every time."""
    key = (
        "shape",
        target,
        tuple(
            (
                n.id,
                n.type,
                tuple((p, tuple((e.source, e.output) for e in es)) for p, es in n.inputs.items()),
            )
            for n in graph.nodes
        ),
    )
    generation = registry.generation  # read before the registry is
    kept = registry.kept_derived(key)
    if isinstance(kept, ShapeFacts):
        return kept
    by_id = graph.by_id
    if target not in by_id:
        raise InvalidRequest(f"target {target!r} is not a node of the graph")
    descriptors = _descriptors(graph, registry)
    for node in graph.nodes:
        _check_inputs(node, descriptors)
    topological_order(graph, by_id)  # a cycle anywhere makes the graph invalid
    order = topological_order(graph, upstream_closure(graph, target))
    runners = {node_id: registry.runner(descriptors[node_id].type) for node_id in order}
    facts = ShapeFacts(descriptors, order, runners, any(map(_fits, runners.values())))
    registry.keep_derived(key, facts, generation, SHAPES_KEPT)
    return facts


def _fits(runner: NodeRunner | None) -> bool:
    if runner is None:
        return False
    kind = type(runner)
    return kind.input_needs is not NodeRunner.input_needs or kind.fitted is not NodeRunner.fitted


def runner_for(runner: NodeRunner | None, descriptor: NodeDescriptor, node_id: str) -> NodeRunner:
    """The node's runner (the registry's, None where it has none), or the error that says why
    this server cannot run it."""
    if runner is not None:
        return runner
    if descriptor.unavailable_reason is not None:
        # Usually a missing extra (e.g. torch): model_missing tells the client what to install.
        raise ModelMissing(
            f"node type {descriptor.type} cannot run here: {descriptor.unavailable_reason}",
            node_id=node_id,
        )
    raise InvalidGraph(
        f"node type {descriptor.type} cannot run here: no runner registered", node_id=node_id
    )


def may_wait_on_disk(graph_json: object, registry: Registry) -> bool:
    """Whether validating `graph_json` may wait on the disk: some node's runner has a
    submit-time check (model files, media), or its params pick from the model catalog (which
    is rescanned now and then). Judged from its node types alone, before it is parsed; any other
    graph's validation is pure computation."""
    if not isinstance(graph_json, dict):
        return False  # refused by the parse, before any check
    nodes = cast(dict[str, object], graph_json).get("nodes")
    if not isinstance(nodes, list):
        return False
    types = frozenset(
        node_type
        for node in cast(list[object], nodes)
        if isinstance(node, dict)
        and isinstance(node_type := cast(dict[str, object], node).get("type"), str)
    )
    key = ("may wait on disk", types)  # judged once per set of node types
    generation = registry.generation
    kept = registry.kept_derived(key)
    if isinstance(kept, bool):
        return kept
    waits = _may_wait(types, registry)
    registry.keep_derived(key, waits, generation, SHAPES_KEPT)
    return waits


def _may_wait(types: frozenset[str], registry: Registry) -> bool:
    for node_type in types:
        if node_type not in registry:
            continue  # refused before any check
        runner = registry.runner(node_type)
        if runner is not None and type(runner).check is not NodeRunner.check:
            return True
        if any(p.options_from is not None for p in registry.descriptor(node_type).params):
            return True
    return False


def _descriptors(graph: Graph, registry: Registry) -> dict[str, NodeDescriptor]:
    out: dict[str, NodeDescriptor] = {}
    for node in graph.nodes:
        if node.type not in registry:
            raise InvalidGraph(f"unknown node type {node.type!r}", node_id=node.id)
        out[node.id] = registry.descriptor(node.type)
    return out


def _check_inputs(node: Node, descriptors: dict[str, NodeDescriptor]) -> None:
    descriptor = descriptors[node.id]
    for port_name, edges in node.inputs.items():
        port = descriptor.input(port_name)
        if port is None:
            known = ", ".join(p.name for p in descriptor.inputs) or "none"
            raise InvalidGraph(
                f"unknown input {port_name!r} for {descriptor.type} (its inputs: {known})",
                node_id=node.id,
            )
        if len(edges) > 1 and not port.multiple:
            raise InvalidGraph(
                f"input {port_name!r} takes one edge, got {len(edges)}", node_id=node.id
            )
        for edge in edges:
            source = descriptors.get(edge.source)
            if source is None:
                raise InvalidGraph(
                    f"input {port_name!r} comes from missing node {edge.source!r}", node_id=node.id
                )
            output = source.output(edge.output)
            if output is None:
                known = ", ".join(p.name for p in source.outputs) or "none"
                raise InvalidGraph(
                    f"input {port_name!r}: node {edge.source!r} ({source.type}) has no output "
                    f"{edge.output!r} (its outputs: {known})",
                    node_id=node.id,
                )
            if not port_satisfies(output.kind, port.kind):
                raise InvalidGraph(
                    f"input {port_name!r} expects {port.kind.value}, but {edge.source!r}."
                    f"{edge.output} gives {output.kind.value}",
                    node_id=node.id,
                )


def _known_sizes(
    node: Node, nodes: Mapping[str, Node], runners: Mapping[str, NodeRunner]
) -> dict[str, tuple[int, int]]:
    """The sizes of the images wired into `node` that are known at submit, by input name (its
    sources come before it in the closure's order: their runners are found already)."""
    sizes: dict[str, tuple[int, int]] = {}
    for port, edges in node.inputs.items():
        if len(edges) != 1 or edges[0].source not in nodes:
            continue
        source = nodes[edges[0].source]
        size = runners[source.id].image_size(source.params)
        if size is not None:
            sizes[port] = size
    return sizes


def _check_required_inputs(node: Node, descriptor: NodeDescriptor) -> None:
    for port in descriptor.inputs:
        if not port.optional and port.name not in node.inputs:
            raise InvalidGraph(f"required input {port.name!r} is not connected", node_id=node.id)


def validate_graph(
    graph: Graph,
    target: str,
    registry: Registry,
    catalog: CatalogView,
    *,
    rng: random.Random | None = None,
    picker_order: PickerOrder = no_picker_order,
) -> ValidatedGraph:
    """Check `graph` for running `target`; return it normalised with its execution order.

    Raises `InvalidRequest` for a target that is not a node, `InvalidGraph` for anything wrong
    with the graph, and whatever a runner's `check` raises (e.g. `ModelMissing`).
    """
    generation = registry.generation  # read before the registry is
    shape = _shape_facts(graph, target, registry)
    by_id, descriptors, order = graph.by_id, shape.descriptors, shape.order

    draw = rng if rng is not None else random.SystemRandom()
    normalised: dict[str, Node] = {}
    for node_id in order:
        node, descriptor = by_id[node_id], descriptors[node_id]
        _check_required_inputs(node, descriptor)
        params = normalize_params(descriptor, node_id, node.params, catalog, picker_order)
        normalised[node_id] = replace(node, params=resolve_seeds(descriptor, params, draw))

    prepared: dict[str, object] = {}
    runners: dict[str, NodeRunner] = {}
    all_facts: dict[str, SubmitFacts] = {}
    for node_id in order:
        runner = runner_for(shape.runners[node_id], descriptors[node_id], node_id)
        runners[node_id] = runner
        node = normalised[node_id]
        upstream = {
            port: [prepared[e.source] for e in edges if e.source in prepared]
            for port, edges in node.inputs.items()
        }
        facts = SubmitFacts(
            frozenset(node.inputs),
            lambda node=node: _known_sizes(node, normalised, runners),
            upstream,
            generation,
        )
        all_facts[node_id] = facts
        try:
            found = runner.check_node(node_id, node.params, facts)
        except InlineError as exc:
            if exc.node_id is None:
                exc.node_id = node_id
            raise
        if found is not None:
            prepared[node_id] = found
    # Every node checked: each prepared value cut to what its consumers in this run read.
    if shape.fits:
        prepared = fit_to_consumers(
            order, target, normalised, descriptors, runners, all_facts, prepared
        )

    nodes = tuple(normalised.get(n.id, n) for n in graph.nodes)
    return ValidatedGraph(
        graph=replace(graph, nodes=nodes),
        target=target,
        order=order,
        descriptors=descriptors,
        runners=runners,
        prepared=prepared,
    )
