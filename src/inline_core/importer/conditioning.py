"""ComfyUI's prompts onto ours: text, its encodes, and zeroed conditionings (mapped where a
sampler uses them)."""

from __future__ import annotations

from inline_core.graph.schema import PortKind
from inline_core.importer.mapper import Mapper
from inline_core.importer.values import Port, Value, describe
from inline_core.importer.workflow import ComfyNode, Link


def primitive_string(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    port = m.text_source(f"c{node.id}", m.text(node, "value"), describe(node))
    return Value(PortKind.TEXT, port, node.id)


def clip_text_encode(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    where = describe(node)
    encoder = m.input_value(node, "clip", PortKind.TEXT_ENCODER)
    raw_text = node.inputs.get("text")
    prompt: Port | None
    if isinstance(raw_text, Link):
        wired = m.value(raw_text, PortKind.TEXT, node, "text")
        prompt = wired.port if wired is not None else None
        if prompt is None:
            m.warn(f"{where}: its text comes from a node that was skipped; the prompt is empty")
            prompt = m.text_source(f"c{node.id}_text", "", where)
    else:
        text = raw_text if isinstance(raw_text, str) else ""
        prompt = m.text_source(f"c{node.id}_text", text, where)
    encoder_port = encoder.port if encoder is not None else None
    port = m.add(
        f"c{node.id}",
        "encode/text",
        {},
        {"text_encoder": encoder_port, "prompt": prompt},
        where,
    )
    return Value(PortKind.CONDITIONING, port, node.id, encoder=encoder_port)


def conditioning_zero_out(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    # Mapped where it is used: `sample` drops a zeroed negative when there is no guidance.
    return Value(PortKind.CONDITIONING, None, node.id)


def flux_guidance(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """FluxGuidance: the guidance a guidance-distilled model embeds, set on the conditioning
    (`conditioning/guidance`; a model that embeds none refuses it at submit, naming it)."""
    conditioning = m.input_value(node, "conditioning", PortKind.CONDITIONING)
    if conditioning is None or conditioning.port is None:
        return conditioning  # a zeroed conditioning stays zeroed (mapped where it is used)
    port = m.add(
        f"c{node.id}",
        "conditioning/guidance",
        {"guidance": m.number(node, "guidance", 3.5)},  # ComfyUI's default
        {"conditioning": conditioning.port},
        describe(node),
    )
    return Value(PortKind.CONDITIONING, port, node.id, encoder=conditioning.encoder)


def empty_prompt(m: Mapper, zeroed: Value, encoder: Port | None, where: str) -> Port:
    text = m.text_source(f"c{zeroed.origin}_text", "", where)
    return m.add(
        f"c{zeroed.origin}", "encode/text", {}, {"text_encoder": encoder, "prompt": text}, where
    )
