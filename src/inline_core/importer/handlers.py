"""The handler table a mapping runs with: the core's handler modules (the low-level vocabulary's
loaders, prompts, sampling, images, masks), then the served families' recipes' handlers, then
the served nodes that declare a ComfyUI class they stand in for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from inline_core.graph.descriptor import NodeDescriptor
from inline_core.importer import (
    conditioning,
    custom_sampling,
    images,
    inpaint,
    loaders,
    sampling,
    text_encoders,
)
from inline_core.importer.mapper import Handler
from inline_core.importer.stand_in import stand_in_for

CORE: dict[str, Handler] = {
    "CheckpointLoaderSimple": loaders.checkpoint_loader,
    "UNETLoader": loaders.unet_loader,
    **{name: text_encoders.clip_loader for name in text_encoders.FILES},
    "VAELoader": loaders.vae_loader,
    "LoraLoaderModelOnly": loaders.lora_loader,
    "LoraLoader": loaders.lora_loader,
    **inpaint.HANDLERS,
    "CLIPTextEncode": conditioning.clip_text_encode,
    "ConditioningZeroOut": conditioning.conditioning_zero_out,
    "FluxGuidance": conditioning.flux_guidance,
    "EmptyLatentImage": sampling.empty_latent,
    "EmptySD3LatentImage": sampling.empty_latent,
    "ModelSamplingAuraFlow": sampling.model_sampling,
    "ModelSamplingSD3": sampling.model_sampling,
    "ModelSamplingFlux": sampling.model_sampling_flux,
    "KSampler": sampling.ksampler,
    "KSamplerAdvanced": sampling.ksampler_advanced,
    **custom_sampling.HANDLERS,
    "VAEDecode": images.vae_decode,
    "VAEDecodeTiled": images.vae_decode,
    "VAEEncode": images.vae_encode,
    "LoadImage": images.load_image,
    "PrimitiveString": conditioning.primitive_string,
    "PrimitiveStringMultiline": conditioning.primitive_string,
}


def handler_table(
    own: Mapping[str, Handler],
    others: Sequence[Mapping[str, Handler]],
    declared: Mapping[str, NodeDescriptor],
) -> dict[str, Handler]:
    """The workflow's family's recipe's handlers (it may read a core class its own way), the
    core's, the other served families' for classes the core lacks, then the declared stand-ins
    for classes nothing else maps."""
    table: dict[str, Handler] = dict(own)
    for handlers in (CORE, *others):
        for name, handler in handlers.items():
            table.setdefault(name, handler)
    for name, descriptor in declared.items():
        table.setdefault(name, stand_in_for(descriptor))
    return table
