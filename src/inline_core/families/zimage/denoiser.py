"""The Z-Image transformer as a batched denoiser.

`ZImageTransformer2DModel` takes per-request lists (latents, captions) and a timestep per item, so
requests with different prompts, sizes and timesteps share one forward; each item's LoRA stack is
added to its own rows of that forward (`diffusion/adapters/`; a forward whose rows all hold one
stack may run on its fused copy, where the device policy says it pays), and each item's control
model adds its hints to its own rows (`control.py`). That per-model state follows the transformer
in place: a split engine's class put there (xDiT, `xdit.py`) gets it.
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
from inline_core.diffusion.row_scopes import RowScoped, ScopesRows
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.families.zimage.control import ControlBranch, RowControl
from inline_core.families.zimage.lora import read_lora


class ZImageDenoiser:
    adapters: AdapterBank  # each row's LoRA stack, on the transformer in place
    control: ControlBranch

    def __init__(
        self,
        transformer: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        adapter_cache: Fetch | None = None,
        model_key: object = "",
        fused_copies: CopyStore | None = None,
    ) -> None:
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self._adapter_cache = adapter_cache
        self._model_key = model_key
        self._fused_copies = fused_copies
        self.step_cache: StepCacheBackend | None = None  # adopted by its pipeline
        self.transformer = transformer

    @property
    def transformer(self) -> nn.Module:
        return self._transformer

    @transformer.setter
    def transformer(self, module: nn.Module) -> None:
        """The transformer that runs, with this denoiser's per-model state bound to it: LoRA row
        hooks and fused copies, the control branch and the step cache. A split engine that puts
        its own class in the resident one's place (xDiT: its own submodules over the same
        tensors) gets them too, never the module it replaced."""
        self._transformer = module
        self.adapters = AdapterBank.placed(
            module,
            read_lora,
            self.placement,
            self._adapter_cache,
            self._model_key,
            self._fused_copies,
        )
        self.control = ControlBranch(
            module, self.device, self.dtype, self._adapter_cache, self._model_key
        )
        if self.step_cache is not None:
            self.adopt_step_cache(StepCacheBackend.of(module, self.step_cache.layout))
        else:
            self._scope_rows()

    def adopt_step_cache(self, backend: StepCacheBackend) -> None:
        backend.add_row_scope(self.adapters.rows)  # a sub-batch's rows keep their own LoRAs
        self.step_cache = backend
        self._scope_rows()

    def _scope_rows(self) -> None:
        """A transformer that runs a batch's rows in calls of their own (xDiT's class) narrows
        each row's LoRA stack and step cache to the rows of each call."""
        if isinstance(self._transformer, ScopesRows):
            scopes: list[RowScoped] = [self.adapters.rows]
            if self.step_cache is not None:
                scopes.append(self.step_cache)
            self._transformer.scope_rows(scopes)

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
        return cached_forward(self.step_cache, self.transformer, caches)
