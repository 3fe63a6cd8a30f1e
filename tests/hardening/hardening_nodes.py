"""A test-only node with a model picker, loaded through `INLINE_PLUGINS=hardening_nodes:register`.

`test/pick` names a file of `diffusion_models/` and makes nothing; it exists so the corpus can try
paths, traversals and links in a picker without a real model family installed.
"""

from __future__ import annotations

from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind

PICK = NodeDescriptor(
    type="test/pick",
    title="Pick a model (test)",
    category="test",
    outputs=(PortSpec("text", PortKind.TEXT),),
    params=(
        ParamSpec(
            "model", ParamWidget.SELECT, None, required=True, options_from="diffusion_models"
        ),
    ),
)


class PickRunner(NodeRunner):
    def run(self, call: NodeCall) -> NodeResult:
        return NodeResult(outputs={"text": str(call.params["model"])})


def register(registry: Registry) -> None:
    registry.register(PICK, PickRunner())
