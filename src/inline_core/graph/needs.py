"""What each node's consumers need of its outputs, gathered at submit against the edges, from the
target back to the sources, so a node whose output comes in several variants makes only those
its consumers read (`NodeRunner.input_needs` says what a node needs of its inputs,
`NodeRunner.fitted` cuts a node's prepared value to what is needed of it).

The target's outputs are the run's result: every variant of them is needed. A consumer outside
the run's closure does not run, so it needs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import Needs, NodeRunner, SubmitFacts
from inline_core.graph.schema import Node


def joined(first: Needs, second: Needs) -> Needs:
    """What two consumers need together: either's variants, every one if either needs all."""
    if first is None or second is None:
        return None
    return first | second


def fit_to_consumers(
    order: Sequence[str],
    target: str,
    nodes: Mapping[str, Node],
    descriptors: Mapping[str, NodeDescriptor],
    runners: Mapping[str, NodeRunner],
    facts: Mapping[str, SubmitFacts],
    prepared: Mapping[str, object],
) -> dict[str, object]:
    """`prepared` (node id -> what its `check` found, `order` topological) with each node's value
    fitted to what the nodes it feeds in this run need of its outputs."""
    # node id -> output name -> what its consumers seen so far need of it
    found: dict[str, dict[str, Needs]] = {node_id: {} for node_id in order}
    fitted = dict(prepared)
    for node_id in reversed(order):  # every consumer of a node comes after it in `order`
        node, runner = nodes[node_id], runners[node_id]
        seen = found[node_id]
        needs: dict[str, Needs] = {
            port.name: None if node_id == target else seen.get(port.name, frozenset())
            for port in descriptors[node_id].outputs
        }
        wanted = runner.input_needs(node.params, facts[node_id], needs)
        for port, edges in node.inputs.items():
            need = wanted.get(port)
            for edge in edges:
                outputs = found[edge.source]
                seen_before = edge.output in outputs
                outputs[edge.output] = joined(outputs[edge.output], need) if seen_before else need
        if node_id in fitted:
            value = runner.fitted(fitted[node_id], needs)
            if value is None:
                del fitted[node_id]
            else:
                fitted[node_id] = value
    return fitted
