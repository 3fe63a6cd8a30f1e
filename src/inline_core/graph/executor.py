"""The executor: runs a validated graph's closure, node by node, on the calling thread.

It orchestrates and never renders: each node's runner does the work (model runners submit a
`SampleJob` to the sampler). For every node it checks for cancellation, gathers the node's inputs
from upstream outputs, reuses cached outputs when the node's content key matches, and reports
`NodeStarted` / `NodeDone` / `NodeFailed` around the runner's own progress events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from PIL import Image

from inline_core.errors import Cancelled, InlineError, RunFailed
from inline_core.graph.cache import NodeCache, key_for
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import CatalogView, NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import Edge, Node, PortKind
from inline_core.graph.validate import ValidatedGraph
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.preview import NONE
from inline_core.runtime.progress import (
    NodeDone,
    NodeFailed,
    NodeStarted,
    RunPlanned,
    node_work,
)
from inline_core.runtime.video import Video
from inline_core.takes import Take

# Ports that carry a model's work: a node with one runs a model (or feeds one that does).
MODEL_PORTS = frozenset(
    {
        PortKind.MODEL,
        PortKind.VAE,
        PortKind.TEXT_ENCODER,
        PortKind.CONDITIONING,
        PortKind.LATENT,
    }
)


@dataclass(frozen=True)
class ExecutionResult:
    takes: tuple[Take, ...]
    outputs: Mapping[str, Any]  # the target node's outputs


@dataclass
class _Executed:
    descriptor: NodeDescriptor
    outputs: Mapping[str, Any]
    key: str | None  # None: not cacheable, so nothing downstream is cacheable either


class Executor:
    def __init__(self, catalog: CatalogView, cache: NodeCache | None = None) -> None:
        # No registry: each run's descriptors and runners come looked up with its
        # `ValidatedGraph` (once per graph shape).
        self.catalog = catalog
        self.cache = cache

    def execute(self, validated: ValidatedGraph, ctx: ExecutionContext) -> ExecutionResult:
        """Run the target's closure in order. Raises `Cancelled`, or an `InlineError` naming the
        node that failed (any other exception from a runner is wrapped in `RunFailed`)."""
        by_id, descriptors = validated.graph.by_id, validated.descriptors
        work = {node_id: _work(by_id[node_id], descriptors[node_id]) for node_id in validated.order}
        ctx.events(RunPlanned(ctx.run_id, work))
        done: dict[str, _Executed] = {}
        takes: list[Take] = []
        for node_id in validated.order:
            ctx.cancel.raise_if_cancelled()
            prepared = validated.prepared.get(node_id)
            node = by_id[node_id]
            executed, node_takes = self._run_node(
                node, descriptors[node_id], validated.runners[node_id], done, ctx, prepared
            )
            done[node_id] = executed
            takes.extend(node_takes)
        return ExecutionResult(takes=tuple(takes), outputs=done[validated.target].outputs)

    def _run_node(
        self,
        node: Node,
        descriptor: NodeDescriptor,
        runner: NodeRunner,
        done: Mapping[str, _Executed],
        ctx: ExecutionContext,
        prepared: object | None,
    ) -> tuple[_Executed, tuple[Take, ...]]:
        ctx.events(NodeStarted(ctx.run_id, node.id))
        try:
            key = self._key(node, descriptor, runner, done, prepared, ctx)
            previews = _previews(runner, ctx)
            cached = (
                self.cache.get_entry(key, previews)
                if self.cache is not None and key is not None
                else None
            )
            if cached is not None:
                reissued = tuple(
                    _reissue(take, ctx, node.id, i) for i, take in enumerate(cached.takes)
                )
                ctx.events(NodeDone(ctx.run_id, node.id, cached=True, takes=reissued))
                return _Executed(descriptor, cached.outputs, key), reissued
            inputs = _gather_inputs(node, descriptor, done)
            result = runner.run(NodeCall(ctx, node.id, node.params, inputs, prepared))
            _check_outputs(descriptor, result)
        except Cancelled:
            raise
        except InlineError as exc:
            if exc.node_id is None:
                exc.node_id = node.id
            ctx.events(NodeFailed(ctx.run_id, node.id, exc.message))
            raise
        except Exception as exc:
            failure = RunFailed(f"{type(exc).__name__}: {exc}", node_id=node.id)
            ctx.events(NodeFailed(ctx.run_id, node.id, failure.message))
            raise failure from exc
        if not result.cacheable:  # e.g. steered while it rendered: not what its key says
            key = None
        if self.cache is not None and key is not None:
            self.cache.put(key, result.outputs, result.takes, previews)
        ctx.events(NodeDone(ctx.run_id, node.id, cached=False, takes=result.takes))
        return _Executed(descriptor, result.outputs, key), result.takes

    def _key(
        self,
        node: Node,
        descriptor: NodeDescriptor,
        runner: NodeRunner,
        done: Mapping[str, _Executed],
        prepared: object | None,
        ctx: ExecutionContext,
    ) -> str | None:
        if self.cache is None or not runner.cacheable:
            return None
        upstream: dict[str, list[tuple[str, str]]] = {}
        for port, edges in node.inputs.items():
            keys: list[tuple[str, str]] = []
            for edge in edges:
                source_key = done[edge.source].key
                if source_key is None:
                    return None
                keys.append((source_key, edge.output))
            upstream[port] = keys
        identity = runner.cache_identity(node.params, prepared)
        if runner.caches_steps:  # cached steps are an approximation: not the same output
            identity = f"{identity}|{ctx.step_cache.identity}"
        return key_for(descriptor, node.params, upstream, self.catalog, identity)


def _work(node: Node, descriptor: NodeDescriptor) -> float:
    """The node's share of the run's work: its steps if it samples; about one step if it runs a
    model (its ports carry one) or a pack's code; next to nothing otherwise."""
    steps = node.params.get("steps") if descriptor.param("steps") is not None else None
    ports = (*descriptor.inputs, *descriptor.outputs)
    runs_model = descriptor.source != "core" or any(p.kind in MODEL_PORTS for p in ports)
    return node_work(steps if isinstance(steps, int) else None, runs_model)


def _previews(runner: NodeRunner, ctx: ExecutionContext) -> str:
    """The step previews a node's render shows in this run: the run's method for a node that
    samples (its steps follow the run's step cache: the family nodes, `sample`), else none."""
    if ctx.preview is None or not runner.caches_steps:
        return NONE
    return ctx.preview.method


def _gather_inputs(
    node: Node, descriptor: NodeDescriptor, done: Mapping[str, _Executed]
) -> dict[str, Any]:
    """Input values per port: a `multiple` port gets a list; `image` into `image[]` is wrapped,
    and `image` into `video` is a one-frame video."""
    inputs: dict[str, Any] = {}
    for port_name, edges in node.inputs.items():
        port = descriptor.input(port_name)
        if port is None:  # validation rejects this; kept so a stale graph fails clearly
            raise RunFailed(f"unknown input {port_name!r}", node_id=node.id)
        values = [_edge_value(node, edge, done) for edge in edges]
        if port.kind == PortKind.IMAGES:
            # Each edge gives a list of images (an image is coerced to a one-image list);
            # fan-in concatenates them in edge order.
            images: list[Any] = []
            for edge, value in zip(edges, values, strict=True):
                source_port = done[edge.source].descriptor.output(edge.output)
                if source_port is not None and source_port.kind == PortKind.IMAGE:
                    images.append(value)
                else:
                    images.extend(cast(list[Any], value))
            inputs[port_name] = images
        elif port.kind == PortKind.VIDEO:
            videos = [
                Video.of_image(value) if isinstance(value, Image.Image) else value
                for value in values
            ]
            inputs[port_name] = videos if port.multiple else videos[0]
        elif port.multiple:
            inputs[port_name] = values
        else:
            inputs[port_name] = values[0]
    return inputs


def _edge_value(node: Node, edge: Edge, done: Mapping[str, _Executed]) -> Any:
    outputs = done[edge.source].outputs
    if edge.output not in outputs:
        raise RunFailed(f"node {edge.source!r} produced no output {edge.output!r}", node_id=node.id)
    return outputs[edge.output]


def _check_outputs(descriptor: NodeDescriptor, result: NodeResult) -> None:
    """A runner must produce every output it declares; say so here, not in a downstream node."""
    missing = [p.name for p in descriptor.outputs if p.name not in result.outputs]
    if missing:
        raise RunFailed(f"{descriptor.type} produced no value for outputs {missing}")


def _reissue(take: Take, ctx: ExecutionContext, node_id: str, index: int) -> Take:
    """A cache hit still gives this run its own take (same bytes, new id, its own file name):
    regenerating adds a take and never points one run at another run's take."""
    return ctx.takes.reissue(take, run_id=ctx.run_id, node_id=node_id, index=index)
