"""Qwen-Image as a family: its node, files, request and capabilities (torch-free).

`alibaba/qwen-image` renders text to image with a Qwen-Image model, or edits one to three
reference images (`image`, `image2`, `image3`) with a Qwen-Image-Edit model; the variant is told
from the model's files. Its torch side is `build.py`, imported on the first render.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from PIL import Image

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import StackRules
from inline_core.contract.sources import Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.inputs import image_input, prompt_text, wired_loras
from inline_core.families.nodes.sampling import guidance_param, refuse_cfg_pp
from inline_core.families.qwen_image.comfy import RECIPE
from inline_core.families.qwen_image.descriptor import (
    EXTRA_HINT,
    IMAGE_INPUTS,
    NODE_TYPE,
    QWEN_IMAGE_DESCRIPTOR,
)
from inline_core.families.qwen_image.download import DOWNLOADS
from inline_core.families.qwen_image.files import RULES, variant_of
from inline_core.families.qwen_image.lora_naming import QWEN_IMAGE_LORAS
from inline_core.families.qwen_image.request import (
    NATIVE_SIZE,
    QwenImageRequest,
    edit_size,
    new_request,
)
from inline_core.families.qwen_image.split import SPLIT_ENGINES, SPLIT_METHODS, support_for
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.source import Source

PREVIEW_FORMAT = "wan21"  # the Qwen-Image VAE's latents are Wan 2.1's: 16 channels
# The node's own guidance where a submit leaves it empty.
GUIDANCE_DEFAULT = {p.name: p.default for p in QWEN_IMAGE_DESCRIPTOR.params if p.name == "guidance"}


class QwenImageFamily(Family):
    name = "qwen-image"
    title = "Qwen-Image"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.qwen_image.build:BUILDER"
    comfy_text_encoder_types = ("qwen_image",)  # how ComfyUI's CLIPLoader loads Qwen2.5-VL
    comfy_node = NODE_TYPE  # its ComfyUI workflows import as one alibaba/qwen-image node
    kit = "inline_core.families.qwen_image.kit:main"
    download = "inline_core.families.qwen_image.download:main"
    loras = QWEN_IMAGE_LORAS
    capabilities = Capabilities(
        # One batched tensor per forward, its rotary positions the first row's image shapes:
        # rows of one shape share a forward, prompts of any length padded under a mask.
        batching="shapes",
        preview_latents=frozenset({PREVIEW_FORMAT}),
        step_cache=frozenset({"dbcache"}),  # per request, on its dual-stream blocks
        # Its own plan on cache-dit's context parallelism: Ulysses or Ring, pads masked (split.py)
        split_methods=SPLIT_METHODS,
        split_engines=SPLIT_ENGINES,
        # Qwen2.5-VL and the 20B transformer are trained in bfloat16.
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),
    )

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (QWEN_IMAGE_DESCRIPTOR,)

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads:
        return DOWNLOADS

    def split_support(self, transformer: Source | None) -> ModelParallelSupport:
        return support_for(transformer)

    def flow_shift(self, scheduler: Source | None) -> float | None:
        return None  # its shift is dynamic (the image's token count), not one number

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        if node_type != NODE_TYPE:
            raise InvalidRequest(f"Qwen-Image has no node {node_type!r}", node_id=node_id)
        images = [i for port in IMAGE_INPUTS if (i := image_input(inputs, port, node_id))]
        edit = _edits(sources)
        if images and not edit:
            raise InvalidRequest(_no_images(sources), node_id=node_id)
        if edit and not images:
            raise InvalidRequest(_needs_image(sources), node_id=node_id)
        width, height = _size(params, images)
        shift = float(params.get("shift") or 0.0)
        request: dict[str, Any] = {
            "prompt": prompt_text(inputs.get("prompt"), node_id),
            "negative_prompt": str(params.get("negative_prompt") or ""),
            "width": width,
            "height": height,
            "steps": int(params["steps"]),
            "guidance": float(params["guidance"]),
            "seed": int(params["seed"]),
            "shift": shift if shift > 0 else None,
            "sampler": str(params.get("sampler") or "euler"),
            "sigma_schedule": str(params.get("schedule") or "simple"),
        }
        take_params = {k: v for k, v in request.items() if k != "shift"}
        take_params["shift"] = shift if shift > 0 else "dynamic"
        take_params["references"] = len(images)
        if images:
            request["images"] = tuple(images)
        loras = wired_loras(inputs, self.name, self.title, node_id)
        if loras:
            request["loras"] = loras
            take_params["loras"] = stack_info(loras)
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        super().check(submit)  # its LoRAs
        if submit.node_type != NODE_TYPE:
            return
        node_id = submit.node_id  # sizes: multiples of 16, by the descriptor's step
        # True CFG (diffusers' `true_cfg_scale`) runs the negative prompt above 1.
        guides = guidance_param(submit.params, GUIDANCE_DEFAULT) > 1
        sampler = submit.params.get("sampler")
        refuse_cfg_pp(sampler, guides, self.title, node_id, guided_from="above 1")
        sources = submit.sources
        if sources is None:
            return  # missing files: refused as model_missing after this
        wired = [port for port in IMAGE_INPUTS if port in submit.wired]
        edit = _edits(sources)
        if wired and not edit:
            raise InvalidRequest(_no_images(sources), node_id=node_id)
        if edit and not wired:
            raise InvalidRequest(_needs_image(sources), node_id=node_id)

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> QwenImageRequest:
        return new_request(model_key, _edits(sources), **kwargs)


def _edits(sources: Sources) -> bool:
    return variant_of(sources.require("transformer")) == "edit"


def _size(params: Mapping[str, Any], images: list[Image.Image]) -> tuple[int, int]:
    """The node's width and height; 0 takes the model's own: 1328 for text to image, an edit's
    last reference at a megapixel (as the edit pipeline sizes its output)."""
    width, height = int(params.get("width") or 0), int(params.get("height") or 0)
    default = edit_size(images[-1].size) if images else (NATIVE_SIZE, NATIVE_SIZE)
    return width or default[0], height or default[1]


def _no_images(sources: Sources) -> str:
    return (
        f"{sources.model_name} is a Qwen-Image text-to-image model and takes no reference "
        "image: pick a Qwen-Image-Edit model to edit images, or unwire image/image2/image3"
    )


def _needs_image(sources: Sources) -> str:
    return f"{sources.model_name} is a Qwen-Image-Edit model: wire the image to edit into image"
