"""Krea 2 as a family: its node, files, request and capabilities (torch-free).

`krea/krea-2` renders text to image with Krea 2 (base or Turbo, told from the files,
`variants.py`) from a diffusers `Krea2Pipeline` folder; its VAE is the Qwen-Image VAE, loaded once
for every family that decodes with it (`build.py`). Its transformer takes one batched tensor and
one set of positions, so requests of one size share a forward. A worker group's split runs it
on cache-dit's Ulysses, Ring or both (`split.py`). Its torch side is `build.py`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import StackRules
from inline_core.contract.sources import Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.families.flow_split import SPLIT_ENGINES, SPLIT_METHODS
from inline_core.families.krea2.comfy import RECIPE
from inline_core.families.krea2.descriptor import EXTRA_HINT, KREA2_DESCRIPTOR, NODE_TYPE
from inline_core.families.krea2.download import DOWNLOADS
from inline_core.families.krea2.files import RULES
from inline_core.families.krea2.formats import config_of
from inline_core.families.krea2.lora_naming import KREA2_LORAS
from inline_core.families.krea2.request import Krea2Request, new_request
from inline_core.families.krea2.split import sequence_refusal, support_for
from inline_core.families.krea2.variants import Krea2Variant, variant_of
from inline_core.families.nodes.inputs import prompt_text, wired_loras
from inline_core.families.nodes.sampling import (
    guidance_param,
    refuse_cfg_pp,
    sampling_request,
)
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.source import Source


class Krea2Family(Family):
    name = "krea-2"
    title = "Krea 2"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.krea2.build:BUILDER"
    comfy_text_encoder_types = ("krea2",)  # how ComfyUI's CLIPLoader loads its Qwen3-VL
    kit = "inline_core.families.krea2.kit:main"
    download = "inline_core.families.krea2.download:main"
    loras = KREA2_LORAS
    capabilities = Capabilities(
        batching="shapes",  # one batched tensor and one set of positions per forward
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),
        step_cache=frozenset({"dbcache"}),  # per request, on its blocks (step_cache.py)
        split_methods=SPLIT_METHODS,  # cache-dit's Krea 2 planner (split.py)
        split_engines=SPLIT_ENGINES,
    )

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (KREA2_DESCRIPTOR,)

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads:
        return DOWNLOADS

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        if node_type != NODE_TYPE:
            raise InvalidRequest(f"Krea 2 has no node {node_type!r}", node_id=node_id)
        kind = _variant(sources, node_id)
        sampling = sampling_request(params, kind.defaults())
        negative = str(params.get("negative_prompt") or "")
        take_params = {**sampling, "negative_prompt": negative, "model_variant": kind.title}
        request: dict[str, Any] = {
            "prompt": prompt_text(inputs.get("prompt"), node_id),
            **sampling,
            "negative_prompt": negative,
            "distilled": kind.distilled,
            "text_layers": kind.text_layers,
        }
        loras = wired_loras(inputs, self.name, self.title, node_id)
        if loras:
            request["loras"] = loras
            take_params["loras"] = stack_info(loras)
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        super().check(submit)  # its LoRAs
        if submit.node_type == NODE_TYPE and submit.sources is not None:
            kind = _variant(submit.sources, submit.node_id)
            # Krea's guidance runs the negative prompt above 0 (Turbo's too, when set).
            guides = guidance_param(submit.params, kind.defaults()) > 0
            sampler = submit.params.get("sampler")
            refuse_cfg_pp(sampler, guides, kind.title, submit.node_id, guided_from="above 0")

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> Krea2Request:
        return new_request(model_key, **kwargs)

    def split_support(self, transformer: Source | None) -> ModelParallelSupport:
        return support_for(transformer)

    def unsplittable(
        self,
        node_type: str,
        params: Mapping[str, Any],
        split: ParallelSpec,
        sources: Sources | None,
        images: Mapping[str, tuple[int, int] | None] | None = None,
    ) -> str | None:
        """A render whose image tokens the split's ranks cannot share evenly."""
        return sequence_refusal(params, split) if node_type == NODE_TYPE else None


def _variant(sources: Sources, node_id: str) -> Krea2Variant:
    transformer = sources.get("transformer")
    if transformer is None:
        raise InvalidRequest("the Krea 2 diffusion model is missing", node_id=node_id)
    config = config_of(transformer)
    if config is None:
        raise InvalidRequest("the Krea 2 diffusion model cannot be read", node_id=node_id)
    taps = config.get("num_text_layers")
    return variant_of(transformer, taps if isinstance(taps, int) else None)
