"""ComfyUI's loaders onto ours: each names its file, looked up in its category (`Mapper.loader`:
the caller's mapping, or the nearest match, never silently another file)."""

from __future__ import annotations

from dataclasses import replace

from inline_core.graph.schema import PortKind
from inline_core.importer.dropped import Change
from inline_core.importer.mapper import Mapper
from inline_core.importer.values import Value, describe
from inline_core.importer.workflow import ComfyNode


def unet_loader(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    dtype = m.literal(node, "weight_dtype")
    if dtype not in (None, "default"):
        m.warn(
            f"{describe(node)}: weight_dtype {dtype!r} is not carried over; the device "
            "policy chooses the precision here"
        )
    name = m.text(node, "unet_name")
    port = m.loader(f"c{node.id}", "load/diffusion-model", name, describe(node))
    return Value(PortKind.MODEL, port, node.id)


def checkpoint_loader(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    name = m.text(node, "ckpt_name")
    where = describe(node)
    m.warn(
        f"{where}: a checkpoint bundles model, text encoder and VAE in one file; "
        "Inline Core loads each from its own folder (diffusion_models/, "
        "text_encoders/, vae/), matched by the checkpoint's name"
    )
    parts = (
        (f"c{node.id}", "load/diffusion-model", PortKind.MODEL),
        (f"c{node.id}_text_encoder", "load/text-encoder", PortKind.TEXT_ENCODER),
        (f"c{node.id}_vae", "load/vae", PortKind.VAE),
    )
    if slot >= len(parts):
        return None
    node_id, node_type, kind = parts[slot]
    port = m.loader(node_id, node_type, name, where, bundled=slot > 0)
    return Value(kind, port, node.id)


def vae_loader(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    name = m.text(node, "vae_name")
    port = m.loader(f"c{node.id}", "load/vae", name, describe(node))
    return Value(PortKind.VAE, port, node.id)


def lora_loader(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """LoraLoaderModelOnly, and LoraLoader's model half: a `load/lora` on the model's way.
    LoraLoader's text-encoder half is not applied here: its CLIP output is the encoder it
    took, listed as a change to the picture unless its strength_clip is 0."""
    where = describe(node)
    if slot == 1:
        encoder = m.input_value(node, "clip", PortKind.TEXT_ENCODER)
        lora_clip_half(m, node)
        return encoder
    model = m.input_value(node, "model", PortKind.MODEL)
    if model is None or model.port is None:
        return None
    strength = m.number(node, "strength_model", 1.0)
    port = m.loader(
        f"c{node.id}",
        "load/lora",
        m.text(node, "lora_name"),
        where,
        param="name",
        params={"strength": strength},
        inputs={"model": model.port},
    )
    return replace(model, port=port)


def lora_clip_half(m: Mapper, node: ComfyNode) -> None:
    """LoraLoader's text-encoder half, not applied: a change to the picture unless its
    strength_clip is 0."""
    if node.class_type != "LoraLoader" or node.id in m.changes:
        return
    if m.number(node, "strength_clip", 1.0) != 0:
        reason = "the LoRA's text-encoder half (strength_clip) is not applied here"
        m.changes[node.id] = Change(node.id, node.class_type, reason)
        m.warn(m.changes[node.id].warning())
