"""A transformer's repeated blocks, found the same way for every family.

A diffusers model names its block classes (`_repeated_blocks`, which diffusers' own regional
compile reads); any other module's blocks are the members of the `nn.ModuleList`s it and its
direct children hold, as the cancel hooks find them. An image VAE's decoder blocks are its middle
block and up blocks.
"""

from __future__ import annotations

from typing import Any, cast

from torch import nn

from inline_core.diffusion.libs import module


def listed_blocks(model: nn.Module) -> list[nn.Module]:
    """The members of the `nn.ModuleList`s `model` and its direct children hold."""
    return [
        block
        for holder in (model, *model.children())
        for child in holder.children()
        if isinstance(child, nn.ModuleList)
        for block in child
    ]


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The blocks of the classes `model` declares repeated (`_repeated_blocks`), else its listed
    blocks."""
    declared = getattr(model, "_repeated_blocks", None)
    if isinstance(declared, list | tuple) and declared:
        names = {str(name) for name in declared}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        found = [module for module in model.modules() if type(module).__name__ in names]
        if found:
            return found
    return listed_blocks(model)


def decoder_blocks(autoencoder: nn.Module) -> list[nn.Module]:
    """The middle block and up blocks of an autoencoder's diffusers 2D `Decoder` (AutoencoderKL:
    SDXL's, FLUX.1's as Z-Image uses it, FLUX.2's). Other decoders give none: the causal video
    decoders (Wan, Qwen-Image, LTX-2) pass a frame cache and its index through their blocks'
    arguments, which dynamo would guard on, a new graph for every block."""
    decoder: Any = getattr(autoencoder, "decoder", None)
    if not isinstance(decoder, module("diffusers.models.autoencoders.vae").Decoder):
        return []
    middle = cast(nn.Module | None, decoder.mid_block)
    ups = cast(nn.ModuleList, decoder.up_blocks)
    return [*([middle] if middle is not None else []), *ups]
