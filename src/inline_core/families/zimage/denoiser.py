"""The Z-Image transformer as a batched denoiser.

`ZImageTransformer2DModel` takes per-request lists (latents, captions) and a timestep per item, so
requests with different prompts, sizes and timesteps share one forward; each item's LoRA stack is
added to its own rows of that forward (`diffusion/adapters/`; a forward whose rows all hold one
stack may run on its fused copy, where the device policy says it pays), and each item's control
model adds its hints to its own rows (`control.py`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.bank import AdapterBank, Fetch
from inline_core.diffusion.adapters.fusing import CopyStore
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.families.zimage.control import ControlBranch, RowControl
from inline_core.families.zimage.lora import read_lora


class ZImageDenoiser:
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
        self.control = ControlBranch(transformer, self.device, self.dtype, adapter_cache, model_key)
        self.step_cache: StepCacheBackend | None = None  # adopted by its pipeline

    def adopt_step_cache(self, backend: StepCacheBackend) -> None:
        backend.add_row_scope(self.adapters.rows)  # a sub-batch's rows keep their own LoRAs
        self.step_cache = backend

    @property
    def in_channels(self) -> int:
        return int(cast(Any, self.transformer).in_channels)

    def predict(
        self,
        latents: Sequence[Latents],
        timesteps: Sequence[Any],
        conditioning: Sequence[Conditioning],
        loras: Sequence[LoraStack] = (),
        controls: Sequence[RowControl | None] = (),
        /,
        caches: Sequence[RowCache | None] = (),
    ) -> list[torch.Tensor]:
        """Raw outputs, one `(C, 1, h, w)` tensor per item (the caller owns guidance and sign);
        `loras`: each item's stack (none: no item has one); `controls`: each item's control;
        `caches`: each item's step cache (none, or None: it computes every block)."""
        x = [cast(torch.Tensor, lat.value).to(self.dtype).unsqueeze(2)[0] for lat in latents]
        t = torch.cat([cast(torch.Tensor, ts) for ts in timesteps])
        caps = [cast(torch.Tensor, c.value).to(self.device, self.dtype) for c in conditioning]
        extra: dict[str, Any] = {}
        with self.swap.use(self.transformer, self.placement):
            if any(c is not None for c in controls):

                @contextmanager
                def rows_for(indexes: Sequence[int]) -> Generator[None]:
                    with self.adapters.applied([loras[i] for i in indexes] if loras else []):
                        yield

                extra["controlnet_block_samples"] = self.control.block_samples(
                    x, t, caps, controls, rows_for
                )
            with self.adapters.forward(loras), self._cached(caches):
                out = self.transformer(x, t, caps, return_dict=False, **extra)[0]
        return list(cast(list[torch.Tensor], out))

    def _cached(self, caches: Sequence[RowCache | None]) -> AbstractContextManager[None]:
        # xDiT puts its own transformer class in the adopted one's place (and may run a batch's
        # sequences one by one): its renders are not cached.
        return cached_forward(self.step_cache, self.transformer, caches)
