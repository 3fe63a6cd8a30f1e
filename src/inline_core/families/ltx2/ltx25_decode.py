"""LTX-2.5's diffusion video decoder, loaded and run (torch; `ltx25.py` says what it is).

diffusers' `LTX2VideoDiffusionDecoderModel.decode` runs as is, on denormalized latents, with the
render's generator (it draws the pixel noise it denoises from it, after the latents' noise, as
diffusers' decode step does), its neighbourhood attention computed block by block
(`neighborhood_attention.py`: diffusers' own flex path holds the whole score matrix). Its noise
spans the whole video, so it decodes in one chunk: a stream gets the video's frames when it is
decoded, the soundtrack before them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.libs import module, quiet
from inline_core.families.ltx2.diffusion_vae_load import load_decoder_file
from inline_core.families.ltx2.neighborhood_attention import use_blocked_attention

VALUE_RANGE = (-1.0, 1.0)  # its decoded floats, as the VAE's


def load_decoder(where: Path, dtype: torch.dtype) -> nn.Module:
    """The `LTX2VideoDiffusionDecoderModel` in the folder or ComfyUI's VAE file `where`
    (`diffusion_vae_load.py`), on the CPU, in `dtype`, its attention blocked."""
    quiet()
    if where.is_file():
        model: Any = load_decoder_file(where, dtype)
    else:
        cls: Any = module("diffusers").LTX2VideoDiffusionDecoderModel
        model = cls.from_pretrained(str(where), local_files_only=True, dtype=dtype)
    use_blocked_attention(model)
    return cast(nn.Module, model).eval()


class DiffusionVideoDecode:
    """The diffusion decoder as a chunked decoder of one chunk
    (`components.step.SupportsChunkedVAEDecode`'s shape), drawing from a CPU generator at
    `noise` (the request's generator's state after the latents' noise): the same each time."""

    chunk_value_range: tuple[float, float] = VALUE_RANGE

    def __init__(self, decoder: nn.Module, noise: torch.Tensor) -> None:
        self.decoder = decoder
        self.noise = noise

    def decode_chunks(self, latents: torch.Tensor, /) -> Iterator[torch.Tensor]:
        generator = torch.Generator("cpu")
        generator.set_state(self.noise)
        model = cast(Any, self.decoder)
        yield cast(torch.Tensor, model.decode(latents, generator=generator, return_dict=False)[0])
