"""The Qwen-Image transformer as a batched denoiser.

`QwenImageTransformer2DModel` takes one `(B, tokens, 64)` tensor, a timestep per row and a text
mask, so rows with different prompts (padded, masked) and steps share a forward; its rotary
positions are its first row's image shapes, so rows of one forward share those (the request's
batch key). Each row's LoRA stack is added to its own rows of that forward
(`diffusion/adapters/`), and each row's step cache decides on its own rows (`diffusion/stepcache/`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.adapters.bank import AdapterBank, Fetch
from inline_core.diffusion.adapters.fusing import CopyStore
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.families.qwen_image.lora import read_lora


class QwenImageDenoiser:
    def __init__(
        self,
        transformer: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        adapter_cache: Fetch | None = None,
        model_key: object = "",
        fused_copies: CopyStore | None = None,
    ) -> None:
        self.transformer = transformer
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.adapters = AdapterBank.placed(
            transformer, read_lora, placement, adapter_cache, model_key, fused_copies
        )
        self.step_cache: StepCacheBackend | None = None  # adopted by its pipeline

    def adopt_step_cache(self, backend: StepCacheBackend) -> None:
        backend.add_row_scope(self.adapters.rows)  # a sub-batch's rows keep their own LoRAs
        self.step_cache = backend

    def predict(
        self,
        latents: Sequence[torch.Tensor],
        timesteps: Sequence[torch.Tensor],
        conditioning: Sequence[Conditioning],
        image_shapes: Sequence[tuple[int, int, int]],
        loras: Sequence[LoraStack] = (),
        caches: Sequence[RowCache | None] = (),
    ) -> torch.Tensor:
        """The velocity of each row, `(B, tokens, 64)`: `latents` are each row's packed tokens
        (its references after its own), `timesteps` each row's sigma, `image_shapes` the shapes
        every row shares, `caches` each row's step cache (none, or None: every block runs)."""
        x = torch.cat([t.to(self.device, self.dtype) for t in latents])
        t = torch.cat([ts.to(self.device) for ts in timesteps]).to(x.dtype)
        embeds, mask = _padded([cast(torch.Tensor, c.value) for c in conditioning])
        shapes = [list(image_shapes)] * x.shape[0]
        with (
            self.swap.use(self.transformer, self.placement),
            self.adapters.forward(loras),
            cached_forward(self.step_cache, self.transformer, caches),
        ):
            out = cast(Any, self.transformer)(
                hidden_states=x,
                timestep=t,
                encoder_hidden_states=embeds.to(self.device, self.dtype),
                encoder_hidden_states_mask=None if mask is None else mask.to(self.device),
                img_shapes=shapes,
                return_dict=False,
            )[0]
        return cast(torch.Tensor, out)


def _padded(embeds: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Prompts of any length as one `(B, L, D)` tensor padded with zeros after each, and its
    mask (None when every prompt is as long as the longest, as the pipelines pass it)."""
    longest = max(e.shape[0] for e in embeds)
    rows = [torch.cat([e, e.new_zeros(longest - e.shape[0], e.shape[1])]) for e in embeds]
    if all(e.shape[0] == longest for e in embeds):
        return torch.stack(rows), None
    mask = torch.zeros(len(embeds), longest, dtype=torch.long)
    for i, e in enumerate(embeds):
        mask[i, : e.shape[0]] = 1
    return torch.stack(rows), mask
