"""Z-Image runners for the low-level primitive vocabulary (torch-free at import and registration).

A primitive graph (`load/*` -> `encode/text` -> `sample` -> `vae/decode`) lowers to the components,
resident cache and batched sampler the `alibaba/z-image-turbo` node uses, so the graph equivalent
to a node render (sampler `euler`, scheduler `simple`, cfg = guidance + 1) gives the same pixels.
"""

from __future__ import annotations

from inline_core.graph.primitives import (
    ENCODE_TEXT,
    LATENT_EMPTY,
    LOAD_DIFFUSION_MODEL,
    LOAD_TEXT_ENCODER,
    LOAD_VAE,
    PRIMITIVE_DESCRIPTORS,
    SAMPLE,
    VAE_DECODE,
    VAE_ENCODE,
)
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeRunner
from inline_core.models.zimage.primitives.loaders import (
    LoadDiffusionModel,
    LoadTextEncoder,
    LoadVAE,
)
from inline_core.models.zimage.primitives.nodes import (
    EmptyLatent,
    EncodeText,
    Sample,
    VAEDecode,
    VAEEncode,
)
from inline_core.models.zimage.primitives.owner import EngineOwner

__all__ = ["PRIMITIVE_TYPES", "register_zimage_primitives"]

PRIMITIVE_TYPES: tuple[str, ...] = tuple(d.type for d in PRIMITIVE_DESCRIPTORS)


def register_zimage_primitives(registry: Registry, owner: EngineOwner) -> None:
    """Register a runner for every primitive, on `owner`'s engine and sampler."""
    runners: dict[str, NodeRunner] = {
        LOAD_DIFFUSION_MODEL.type: LoadDiffusionModel(owner),
        LOAD_VAE.type: LoadVAE(owner),
        LOAD_TEXT_ENCODER.type: LoadTextEncoder(owner),
        ENCODE_TEXT.type: EncodeText(owner),
        LATENT_EMPTY.type: EmptyLatent(),
        SAMPLE.type: Sample(owner),
        VAE_DECODE.type: VAEDecode(owner),
        VAE_ENCODE.type: VAEEncode(owner),
    }
    for descriptor in PRIMITIVE_DESCRIPTORS:
        registry.register(descriptor, runners[descriptor.type])
