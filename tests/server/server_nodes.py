"""Test-only nodes, loaded into the server through `INLINE_PLUGINS=server_nodes:register`.

- `test/slow`: sleeps `steps` x `delay` seconds in small cancellable steps, reporting progress,
  then writes one PNG take whose colour comes from its seed (so a re-run reproduces its bytes).
- `test/boom`: raises an ordinary exception, as a buggy runner would.
- `test/with-model`: `test/slow` that names a model in `checkpoints/` (only a server whose catalog
  lists it may run it).
- `test/cuda-only`: `test/slow` whose descriptor requires a CUDA device.
- `test/gated`: reports its first step, then waits (cancellably) until the file `gate` exists,
  then writes a take as `test/slow` does: a run that is in progress for as long as a test wants,
  whatever the machine's load.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PIL import Image

from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind

SLOW = NodeDescriptor(
    type="test/slow",
    title="Slow (test)",
    category="test",
    output_kind="image",
    inputs=(PortSpec("text", PortKind.TEXT, optional=True),),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        ParamSpec("steps", ParamWidget.NUMBER, 5, minimum=1, maximum=1_000_000, integer=True),
        ParamSpec("delay", ParamWidget.NUMBER, 0.01, minimum=0.0, maximum=10.0),
        ParamSpec("seed", ParamWidget.SEED, -1),
    ),
)

WITH_MODEL = replace(
    SLOW,
    type="test/with-model",
    title="Slow with a model (test)",
    params=(
        *SLOW.params,
        ParamSpec("model", ParamWidget.SELECT, required=True, options_from="checkpoints"),
    ),
)

GATED = replace(
    SLOW,
    type="test/gated",
    title="Gated (test)",
    params=(*SLOW.params, ParamSpec("gate", ParamWidget.TEXT, "", required=True)),
)

CUDA_ONLY = replace(SLOW, type="test/cuda-only", title="CUDA only (test)", requires_device="cuda")

BOOM = NodeDescriptor(
    type="test/boom",
    title="Boom (test)",
    category="test",
    inputs=(PortSpec("text", PortKind.TEXT, optional=True),),
    outputs=(PortSpec("image", PortKind.IMAGE),),
)


class SlowRunner(NodeRunner):
    cacheable = False

    def run(self, call: NodeCall) -> NodeResult:
        steps = int(call.params["steps"])
        delay = float(call.params["delay"])
        reporter = call.ctx.reporter(call.node_id)
        for step in range(1, steps + 1):
            call.ctx.cancel.wait(delay)
            call.ctx.cancel.raise_if_cancelled()
            reporter.step(step, steps)
        return seeded_take(call)


def seeded_take(call: NodeCall) -> NodeResult:
    """One PNG take whose colour comes from the call's seed."""
    seed = int(call.params["seed"])
    colour = (seed % 251, (seed // 251) % 251, (seed // 63001) % 251)
    image = Image.new("RGB", (8, 8), colour)
    take = call.ctx.save_image(call.node_id, image, call.params)
    return NodeResult(outputs={"image": image}, takes=(take,))


class GatedRunner(NodeRunner):
    cacheable = False

    def run(self, call: NodeCall) -> NodeResult:
        gate = Path(str(call.params["gate"]))
        reporter = call.ctx.reporter(call.node_id)
        reporter.step(1, 2)
        while not gate.exists():
            call.ctx.cancel.wait(0.01)
            call.ctx.cancel.raise_if_cancelled()
        reporter.step(2, 2)
        return seeded_take(call)


class BoomRunner(NodeRunner):
    def run(self, call: NodeCall) -> NodeResult:
        raise RuntimeError("boom: this test node always fails")


def register(registry: Registry) -> None:
    registry.register(SLOW, SlowRunner())
    registry.register(WITH_MODEL, SlowRunner())
    registry.register(CUDA_ONLY, SlowRunner())
    registry.register(GATED, GatedRunner())
    registry.register(BOOM, BoomRunner())
