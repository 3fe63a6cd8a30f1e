"""ComfyUI's images through the VAE, and its image loader (its MASK output: `inpaint.py`)."""

from __future__ import annotations

from inline_core.graph.schema import PortKind
from inline_core.importer.inpaint import image_alpha
from inline_core.importer.mapper import Mapper
from inline_core.importer.values import Value, describe
from inline_core.importer.workflow import ComfyNode


def vae_decode(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    where = describe(node)
    if node.class_type != "VAEDecode":
        m.warn(f"{where}: decoded as a plain VAEDecode; the device policy decides tiling")
    latent = m.input_value(node, "samples", PortKind.LATENT)
    vae = m.input_value(node, "vae", PortKind.VAE)
    port = m.add(
        f"c{node.id}",
        "vae/decode",
        {},
        {"vae": vae.port if vae else None, "latent": latent.port if latent else None},
        where,
    )
    return Value(PortKind.IMAGE, port, node.id)


def vae_encode(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    vae = m.input_value(node, "vae", PortKind.VAE)
    image = m.input_value(node, "pixels", PortKind.IMAGE)
    port = m.add(
        f"c{node.id}",
        "vae/encode",
        {},
        {"vae": vae.port if vae else None, "image": image.port if image else None},
        describe(node),
    )
    return Value(PortKind.LATENT, port, node.id)


def load_image(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """LoadImage: its IMAGE an `input/image`, its MASK an `input/mask` (`inpaint.py`)."""
    if slot == 1:
        return image_alpha(m, node)
    port = m.add(f"c{node.id}", "input/image", {"asset": m.image_asset(node)}, {}, describe(node))
    return Value(PortKind.IMAGE, port, node.id)
