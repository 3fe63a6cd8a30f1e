"""`conditioning/guidance` (ComfyUI's FluxGuidance): the guidance a guidance-distilled model
embeds, set on a conditioning. `sample` hands it to the model's family
(`Family.embedded_guidance`), which refuses it, naming it, for a model that embeds none: at
submit where the graph shows the model, else at run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inline_core.contract.handles import ConditioningHandle
from inline_core.families.nodes.inputs import handle_input
from inline_core.graph.primitives import CONDITIONING_GUIDANCE
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner, SubmitFacts

DEFAULT = float(CONDITIONING_GUIDANCE.params[0].default or 0.0)


@dataclass(frozen=True)
class Guided:
    """What `conditioning/guidance` prepares at submit: its guidance, and what the nodes wired
    into its conditioning prepared (the encoder's handle, whose reading `sample` checks)."""

    guidance: float
    upstream: tuple[object, ...]


def unwrapped(prepared: Sequence[object]) -> tuple[list[object], list[float]]:
    """What a conditioning's nodes prepared at submit, through any `conditioning/guidance`:
    the encoders' handles, and the guidances set on the way."""
    found: list[object] = []
    guidances: list[float] = []
    for item in prepared:
        while isinstance(item, Guided):  # its one conditioning's, if any
            guidances.append(item.guidance)
            item = item.upstream[0] if item.upstream else None
        if item is not None:
            found.append(item)
    return found, guidances


def with_guidance(handle: ConditioningHandle, guidance: float) -> ConditioningHandle:
    """The conditioning with `guidance`, in every family's reading of it."""
    readings = {
        name: dataclasses.replace(reading, guidance=guidance)
        for name, reading in handle.readings.items()
    }
    return dataclasses.replace(handle, guidance=guidance, readings=readings)


class ConditioningGuidance(NodeRunner):
    needs_follow = {"conditioning": "conditioning"}  # it passes on the readings it is given

    def check_node(
        self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts
    ) -> object | None:
        super().check_node(node_id, params, facts)
        guidance = float(params.get("guidance", DEFAULT))
        return Guided(guidance, tuple(facts.upstream.get("conditioning", ())))

    def run(self, call: NodeCall) -> NodeResult:
        handle = handle_input(call, "conditioning", ConditioningHandle)
        guidance = float(call.params.get("guidance", DEFAULT))
        return NodeResult(outputs={"conditioning": with_guidance(handle, guidance)})
