"""Builds step pipelines from resident components (imports torch; loaded on a node's first run).

One engine per server. It asks the device policy for every placement, loads components through the
resident cache and hands out one pipeline object per loaded stack, so concurrent requests on the
same model reach the sampler as the same pipeline and may share forwards. The low-level primitives
(`load/*`, `encode/text`, `sample`, `vae/*`) take the same components one at a time, under the same
keys, so a node render and a primitive graph on the same files share what is resident.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

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
from inline_core.models.zimage.pipeline import ZImageDenoisePipeline, ZImageStepPipeline
from inline_core.models.zimage.placements import PolicyLike, zimage_placements
from inline_core.models.zimage.remote import rank_spec
from inline_core.models.zimage.residency import ResidentCache
from inline_core.models.zimage.resolve import Source, ZImageSources

M = TypeVar("M", bound=nn.Module)


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
        self._denoisers: dict[
            tuple[Hashable, ...], tuple[tuple[object, ...], ZImageDenoisePipeline]
        ] = {}

    def placements(self) -> tuple[PlacementLike, PlacementLike, PlacementLike]:
        return zimage_placements(self.policy)

    # -- one component at a time: (resident key, loaded value) ---------------------------------

    def transformer(self, source: Source) -> tuple[Hashable, nn.Module]:
        place = self.placements()[1]
        key = ("transformer", source.identity(), place)
        return key, self.cache.get(key, _sized(lambda: load_transformer(source, place)))

    def text_encoder(self, source: Source) -> tuple[Hashable, nn.Module]:
        place = self.placements()[0]
        key = ("text_encoder", source.identity(), place)
        return key, self.cache.get(key, _sized(lambda: load_text_encoder(source, place)))

    def vae(self, source: Source) -> tuple[Hashable, nn.Module]:
        place = self.placements()[2]
        key = ("vae", source.identity(), place)
        return key, self.cache.get(key, _sized(lambda: load_vae(source, place)))

    def tokenizer(self, source: Source) -> tuple[Hashable, Any]:
        key = ("tokenizer", source.identity())
        return key, self.cache.get(key, lambda: (load_tokenizer(source), 0))

    def scheduler_config(self, source: Source | None) -> tuple[Hashable, dict[str, Any]]:
        key = ("scheduler", "default" if source is None else source.identity())
        config: dict[str, Any] = self.cache.get(key, lambda: (load_scheduler_config(source), 0))
        return key, config

    # -- components wrapped for use ------------------------------------------------------------

    def prompt_encoder(self, encoder: Source, tokenizer: Source) -> QwenPromptEncoder:
        _key, model = self.text_encoder(encoder)
        _key, tok = self.tokenizer(tokenizer)
        return QwenPromptEncoder(tok, model, self.placements()[0], self.swap)

    def flux_vae(self, source: Source) -> FluxVAE:
        _key, module = self.vae(source)
        return FluxVAE(module, self.placements()[2], self.swap)

    def denoise_pipeline_for(
        self, transformer_source: Source, scheduler_source: Source | None
    ) -> ZImageDenoisePipeline:
        """The transformer and its schedule alone (the `sample` node's pipeline), one per model."""
        dit_place = self.placements()[1]
        transformer_key, transformer = self.transformer(transformer_source)
        scheduler_key, scheduler_config = self.scheduler_config(scheduler_source)
        parts = (transformer, scheduler_config)
        stack_key = (transformer_key, scheduler_key)
        with self._lock:
            self._forget_evicted()
            known = self._denoisers.get(stack_key)
            if known is not None and all(a is b for a, b in zip(known[0], parts, strict=True)):
                return known[1]
            pipeline = ZImageDenoisePipeline(
                denoiser=ZImageDenoiser(transformer, dit_place, self.swap),
                scheduler_config=scheduler_config,
                model_key=transformer_key,
                serial_phases=dit_place.offload,
            )
            self._denoisers[stack_key] = (parts, pipeline)
            return pipeline

    # -- the node's whole stack ----------------------------------------------------------------

    def pipeline_for(self, sources: ZImageSources) -> ZImageStepPipeline:
        te_place, dit_place, vae_place = self.placements()
        transformer_key, transformer = self.transformer(sources.transformer)
        text_encoder_key, text_encoder = self.text_encoder(sources.text_encoder)
        vae_key, vae = self.vae(sources.vae)
        tokenizer_key, tokenizer = self.tokenizer(sources.tokenizer)
        scheduler_key, scheduler_config = self.scheduler_config(sources.scheduler)
        parts = (transformer, text_encoder, vae, tokenizer, scheduler_config)
        stack_key = (transformer_key, text_encoder_key, vae_key, tokenizer_key, scheduler_key)
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
                model_key=transformer_key,  # the weights, device and dtype of the forward
                serial_phases=any(p.offload for p in (te_place, dit_place, vae_place)),
                # The same stack, rebuilt from the same files inside a worker group's ranks.
                remote=rank_spec(sources, (te_place, dit_place, vae_place)),
            )
            self._pipelines[stack_key] = (parts, pipeline)
            return pipeline

    def _forget_evicted(self) -> None:
        """Drop pipelines holding a component the cache evicted, so its memory can be freed."""
        for memo in (self._pipelines, self._denoisers):
            for stack_key, (parts, _pipeline) in list(memo.items()):
                if any(self.cache.peek(k) is not p for k, p in zip(stack_key, parts, strict=True)):
                    del memo[stack_key]
