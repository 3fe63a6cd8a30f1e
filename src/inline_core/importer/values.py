"""What the mapping hands around: our ports, the values ComfyUI's output slots became, and how a
ComfyUI node is named in a message."""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.graph.schema import PortKind
from inline_core.importer.workflow import ComfyNode

COMFY_KINDS: dict[str, PortKind] = {
    "MODEL": PortKind.MODEL,
    "CLIP": PortKind.TEXT_ENCODER,
    "VAE": PortKind.VAE,
    "CONDITIONING": PortKind.CONDITIONING,
    "LATENT": PortKind.LATENT,
    "IMAGE": PortKind.IMAGE,
    "MASK": PortKind.MASK,
    "STRING": PortKind.TEXT,
}


@dataclass(frozen=True)
class Port:
    node: str
    output: str


@dataclass(frozen=True)
class Value:
    """What a ComfyUI output slot became in our graph."""

    kind: PortKind
    port: Port | None  # None only for a zeroed conditioning (ConditioningZeroOut)
    origin: str  # the ComfyUI node it came from
    shift: float | None = None  # a model's flow shift, set by ModelSamplingSD3/AuraFlow on the way
    mu: float | None = None  # or its exponential shift, set by ModelSamplingFlux
    shift_node: ComfyNode | None = None  # the ModelSampling* node that set it
    encoder: Port | None = None  # the text encoder behind a conditioning


def describe(node: ComfyNode) -> str:
    title = f" ({node.title!r})" if node.title and node.title != node.class_type else ""
    return f"{node.class_type} {node.id}{title}"
