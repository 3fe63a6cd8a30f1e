"""Builds step pipelines from resident components (imports torch; loaded on a node's first run).

One engine per server. It asks the device policy for every placement, loads components through the
resident cache and hands out one pipeline object per loaded stack, so concurrent requests on the
same model reach the sampler as the same pipeline and may share forwards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

from torch import nn

from inline_core.components.diffusers_zimage.denoiser import ZImageDenoiser
from inline_core.components.diffusers_zimage.placement import (
    OffloadSwap,
    PlacementLike,
    module_bytes,
)
from inline_core.components.diffusers_zimage.text_encoder import QwenPromptEncoder
from inline_core.components.diffusers_zimage.vae import FluxVAE
from inline_core.models.zimage.loading import (
    load_scheduler_config,
    load_text_encoder,
    load_tokenizer,
    load_transformer,
    load_vae,
)
from inline_core.models.zimage.pipeline import ZImageStepPipeline
from inline_core.models.zimage.residency import ResidentCache
from inline_core.models.zimage.resolve import ZImageSources

M = TypeVar("M", bound=nn.Module)


class PolicyLike(Protocol):
    def placement(self, role: str, *, fp16_safe: bool = True) -> PlacementLike: ...


def _sized(load: Callable[[], M]) -> Callable[[], tuple[M, int]]:
    def run() -> tuple[M, int]:
        module = load()
        return module, module_bytes(module)

    return run


class ZImageEngine:
    def __init__(self, policy: PolicyLike, cache: ResidentCache) -> None:
        self.policy = policy
        self.cache = cache
        self.swap = OffloadSwap()
        self._lock = threading.Lock()
        # stack key -> (component objects, pipeline); rebuilt when a component was reloaded.
        self._pipelines: dict[
            tuple[Hashable, ...], tuple[tuple[object, ...], ZImageStepPipeline]
        ] = {}

    def placements(self) -> tuple[PlacementLike, PlacementLike, PlacementLike]:
        # Z-Image's transformer (and Qwen3) overflow float16: ask for bf16/fp32 instead.
        return (
            self.policy.placement("text_encoder", fp16_safe=False),
            self.policy.placement("denoiser", fp16_safe=False),
            self.policy.placement("vae"),
        )

    def pipeline_for(self, sources: ZImageSources) -> ZImageStepPipeline:
        te_place, dit_place, vae_place = self.placements()
        keys: dict[str, Hashable] = {
            "transformer": ("transformer", sources.transformer.identity(), dit_place),
            "text_encoder": ("text_encoder", sources.text_encoder.identity(), te_place),
            "vae": ("vae", sources.vae.identity(), vae_place),
            "tokenizer": ("tokenizer", sources.tokenizer.identity()),
            "scheduler": (
                "scheduler",
                "default" if sources.scheduler is None else sources.scheduler.identity(),
            ),
        }
        transformer = self.cache.get(
            keys["transformer"], _sized(lambda: load_transformer(sources.transformer, dit_place))
        )
        text_encoder = self.cache.get(
            keys["text_encoder"], _sized(lambda: load_text_encoder(sources.text_encoder, te_place))
        )
        vae = self.cache.get(keys["vae"], _sized(lambda: load_vae(sources.vae, vae_place)))
        tokenizer: Any = self.cache.get(
            keys["tokenizer"], lambda: (load_tokenizer(sources.tokenizer), 0)
        )
        scheduler_config: dict[str, Any] = self.cache.get(
            keys["scheduler"], lambda: (load_scheduler_config(sources.scheduler), 0)
        )
        parts = (transformer, text_encoder, vae, tokenizer, scheduler_config)
        stack_key = tuple(keys.values())
        with self._lock:
            self._forget_evicted()
            known = self._pipelines.get(stack_key)
            if known is not None and all(a is b for a, b in zip(known[0], parts, strict=True)):
                return known[1]
            pipeline = ZImageStepPipeline(
                text_encoder=QwenPromptEncoder(tokenizer, text_encoder, te_place, self.swap),
                denoiser=ZImageDenoiser(transformer, dit_place, self.swap),
                vae=FluxVAE(vae, vae_place, self.swap),
                scheduler_config=scheduler_config,
                model_key=keys["transformer"],  # the weights, device and dtype of the forward
                serial_phases=any(p.offload for p in (te_place, dit_place, vae_place)),
            )
            self._pipelines[stack_key] = (parts, pipeline)
            return pipeline

    def _forget_evicted(self) -> None:
        """Drop pipelines holding a component the cache evicted, so its memory can be freed."""
        for stack_key, (parts, _pipeline) in list(self._pipelines.items()):
            if any(self.cache.peek(k) is not p for k, p in zip(stack_key, parts, strict=True)):
                del self._pipelines[stack_key]
