"""Wan as a family: its node, files, request and capabilities (torch-free).

`alibaba/wan` renders text to video with a Wan 2.1 T2V model (1.3B or 14B), Wan 2.2 TI2V-5B or
Wan 2.2 A14B's pair of experts (either file picks the pair, `experts.py`), and image to video
with the 5B; the variant is told from the file's shapes (`variants.py`) and
gives the defaults of the params left empty. Its transformer takes one batched tensor, so
requests of one latent shape (size and frames) share a forward. Its VAE decodes in temporal
chunks, streamed to the run's clients as they decode. Its torch side is `build.py` (imported on
the first render).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import SCHEDULER, StackRules
from inline_core.contract.handles import LoraHandle
from inline_core.contract.lora_stacks import expert_stacks, lora_handles, lora_stack
from inline_core.contract.sources import Missing, Resolution, Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.diffusion.formats import wan22_vae, wan_vae
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.inputs import image_input, prompt_text
from inline_core.families.nodes.video_params import check_encoders, whole_numbers
from inline_core.families.wan import experts, lora_shapes, vision_files
from inline_core.families.wan.comfy import RECIPE
from inline_core.families.wan.descriptor import (
    EXTRA_HINT,
    GUIDANCE_DEFAULT,
    MODEL_OWN,
    NODE_TYPE,
    STEPS_DEFAULT,
    WAN_DESCRIPTOR,
)
from inline_core.families.wan.download import DOWNLOADS
from inline_core.families.wan.files import RULES, flow_shift, source_vae_channels
from inline_core.families.wan.lora_naming import WAN_LORAS
from inline_core.families.wan.request import (
    TEMPORAL_FACTOR,
    WanRequest,
    cfg_pp_refusal,
    new_request,
    sampling_refusal,
    switch_step_refusal,
)
from inline_core.families.wan.split import (
    SPLIT_ENGINES,
    SPLIT_METHODS,
    sequence_refusal,
    support_for,
)
from inline_core.families.wan.transformer import config_of
from inline_core.families.wan.variants import T2V, WanVariant, model_title, variant_of
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.source import Source

# Each VAE's latents in the step previews' table (`diffusion/preview/formats.py`), by their
# channels: Wan 2.1's (its models and Wan 2.2 A14B's) and Wan 2.2's (the TI2V-5B's).
PREVIEW_LATENTS = {wan_vae.LATENT_CHANNELS: "wan21", wan22_vae.LATENT_CHANNELS: "wan22"}

REQUEST_PARAMS = (
    "width",
    "height",
    "frames",
    "fps",
    "steps",
    "guidance",
    "guidance_2",
    "switch_step",
    "seed",
    "format",
)


class WanFamily(Family):
    name = "wan"
    title = "Wan"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.wan.build:BUILDER"
    comfy_text_encoder_types = ("wan",)  # how ComfyUI's CLIPLoader loads UMT5 for Wan
    kit = "inline_core.families.wan.kit:main"
    download = "inline_core.families.wan.download:main"
    loras = WAN_LORAS
    capabilities = Capabilities(
        batching="shapes",  # one batched tensor per forward: one latent shape per forward
        chunked_decode=True,
        # UMT5 overflows float16 (T5's known activations); Wan is trained in bfloat16.
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),
        step_cache=frozenset({"dbcache"}),  # per request, on its blocks (step_cache.py)
        preview_latents=frozenset(PREVIEW_LATENTS.values()),
        # cache-dit's context parallelism (its Wan plan): Ulysses, Ring (split.py)
        split_methods=SPLIT_METHODS,
        split_engines=SPLIT_ENGINES,
    )

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (WAN_DESCRIPTOR,)

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads:
        return DOWNLOADS

    def model_param(self, node_type: str, params: Mapping[str, Any]) -> str | None:
        """The model picked, or the first in the catalog that renders from a prompt alone (an
        image-to-video-only model is never the default)."""
        value = params.get("model")
        if value:
            return str(value)
        for entry in self.files.models():
            found = self.files.model_file(entry)
            config = None if found is None else config_of(found[0])
            kind = variant_of(config, experts.expert_of(entry.name) is not None)
            if kind is not None and not kind.needs_image:
                return entry.name
        return None

    def resolve(self, node_type: str, params: Mapping[str, Any]) -> Resolution:
        """The stack as the resolver finds it, with an A14B expert's sibling beside it."""
        found = self.files.found(self.model_param(node_type, params), self.files.picks_of(params))
        missing: list[Missing] = list(found.missing)
        parts = experts.with_experts(found.parts, missing)
        parts = vision_files.with_image_encoder(parts, missing, self.catalog, self.env)
        defaults = (SCHEDULER, vision_files.IMAGE_PROCESSOR)  # None: the built-in one
        if any(source is None for name, source in parts.items() if name not in defaults):
            return Resolution(RULES.title, None, tuple(missing))
        return Resolution(RULES.title, Sources.of(self.name, found.name, parts), tuple(missing))

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        if node_type != NODE_TYPE:
            raise InvalidRequest(f"Wan has no node {node_type!r}", node_id=node_id)
        kind = _variant(sources)
        image = image_input(inputs, "image", node_id)
        if image is not None and not kind.image_to_video:
            raise InvalidRequest(_no_image(sources), node_id=node_id)
        if image is None and kind.needs_image:
            raise InvalidRequest(_needs_image(kind), node_id=node_id)
        prompt = prompt_text(inputs.get("prompt"), node_id)
        request: dict[str, Any] = {
            "prompt": prompt,
            "negative_prompt": str(params.get("negative_prompt") or ""),
            **{name: params[name] for name in REQUEST_PARAMS},
        }
        for name, value in kind.defaults().items():
            if request[name] is None:
                request[name] = value
        whole_numbers(request)
        request["guidance"] = float(request["guidance"])
        if request["guidance_2"] is not None:
            request["guidance_2"] = float(request["guidance_2"])
        if request["switch_step"] is not None:
            request["switch_step"] = int(request["switch_step"])
        request["sampler"] = str(params.get("sampler") or MODEL_OWN)
        request["sigma_schedule"] = str(params.get("schedule") or MODEL_OWN)
        boundary = None if kind.boundary is None else experts.boundary_ratio(sources, kind.boundary)
        if boundary is not None:
            request["boundary_ratio"] = boundary
        shift = params.get("shift")
        if shift is None and sources.get("scheduler") is None:
            shift = kind.shift  # a single file: its variant's published shift
        request["shift"] = None if shift is None else float(shift)
        pair_only = ("guidance_2", "switch_step")
        take_params = {k: v for k, v in request.items() if k not in pair_only or v is not None}
        take_params["schedule"] = take_params.pop("sigma_schedule")  # the node's name for it
        if boundary is not None:  # what the low-noise expert ran at, and from which step
            low = request["guidance_2"]
            take_params["guidance_2"] = request["guidance"] if low is None else low
            take_params["switch_step"] = request["switch_step"]  # None: at the boundary ratio
        take_params["image_to_video"] = image is not None
        if image is not None:
            request["image"] = image
        handles = lora_handles(inputs.get("loras"), self.name, self.title, node_id)
        if experts.is_pair(sources):
            high, low = expert_stacks(handles, self.name, self.title, node_id)
            if high or low:
                request.update(loras=high, loras_2=low)
                take_params["loras"] = lora_info(handles)
        elif handles:
            loras = lora_stack(handles, self.name, self.title, node_id)
            request["loras"] = loras
            take_params["loras"] = stack_info(loras)
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        if submit.node_type != NODE_TYPE:
            return
        self._check_params(submit.params, submit.wired, submit.sources, submit.node_id)
        self._check_loras(submit.loras, submit.sources, submit.node_id)

    def _check_loras(self, loras: Sequence[object], sources: Sources | None, node_id: str) -> None:
        """A LoRA of another family, one that picks an expert on a one-model stack, or one
        trained for another size of Wan (its shapes read from its header) is refused."""
        handles = lora_handles(list(loras), self.name, self.title, node_id)
        if not handles or sources is None:
            return
        if not experts.is_pair(sources):
            lora_stack(handles, self.name, self.title, node_id)
        transformer = sources.get("transformer")
        config = None if transformer is None else config_of(transformer)
        if config is not None:
            for handle in handles:
                lora_shapes.check(handle.use, config, sources.model_name, node_id)

    def _check_params(
        self,
        params: Mapping[str, Any],
        wired: frozenset[str],
        sources: Sources | None,
        node_id: str,
    ) -> None:
        frames = params.get("frames")
        if frames is not None and (int(frames) - 1) % TEMPORAL_FACTOR:
            raise InvalidRequest(
                f"param 'frames' must be 4k+1 (1, 5, 9, ..., 81), got {frames}: the Wan VAE "
                "decodes the first frame alone and four frames per latent frame after it",
                node_id=node_id,
            )
        check_encoders(params, node_id, "a lossless animated PNG")
        if sources is None:
            return  # refused as model_missing once these checks have run
        transformer = sources.get("transformer")
        config = None if transformer is None else config_of(transformer)
        if config is not None and variant_of(config, experts.is_pair(sources)) is None:
            raise InvalidRequest(
                f"model {sources.model_name!r} is an image-to-video expert of Wan 2.2 "
                "A14B, which renders only as a pair: name its two files ..._high_noise_... and "
                "..._low_noise_..., side by side",
                node_id=node_id,
            )
        kind = _variant(sources)
        vae = sources.get("vae")
        channels = None if vae is None else source_vae_channels(vae)
        if vae is not None and channels is not None and channels != kind.latent_channels:
            raise InvalidRequest(
                f"the VAE {vae.location.name!r} makes {channels}-channel latents, but "
                f"{kind.title} takes {kind.latent_channels}: use {kind.vae_file}",
                node_id=node_id,
            )
        if "image" in wired and not kind.image_to_video:
            raise InvalidRequest(_no_image(sources), node_id=node_id)
        if "image" not in wired and kind.needs_image:
            raise InvalidRequest(_needs_image(kind), node_id=node_id)
        steps = int(params.get("steps") or STEPS_DEFAULT)
        self._check_sampling(params, kind.boundary is not None, node_id)
        switch = params.get("switch_step")
        if switch is not None and not (kind.boundary is not None and 1 <= int(switch) < steps):
            raise InvalidRequest(
                switch_step_refusal(int(switch), steps, kind.boundary is not None),
                node_id=node_id,
            )
        if params.get("guidance_2") is not None and kind.boundary is None:
            raise InvalidRequest(
                f"param 'guidance_2' is the low-noise expert's guidance, and {kind.title} has one "
                "model: leave it empty, or pick a Wan 2.2 A14B expert",
                node_id=node_id,
            )
        for name in ("width", "height"):
            value = params.get(name)
            if value is not None and int(value) % kind.size_multiple:
                raise InvalidRequest(
                    f"param '{name}' must be a multiple of {kind.size_multiple} for "
                    f"{kind.title} (its VAE is {kind.spatial_factor}x down, then 2x2 patches), "
                    f"got {value}",
                    node_id=node_id,
                )

    def _check_sampling(self, params: Mapping[str, Any], pair: bool, node_id: str) -> None:
        """A sampler or schedule Wan does not run, or a CFG++ sampler on unguided steps."""
        sampler = str(params.get("sampler") or MODEL_OWN)
        guidance = float(params.get("guidance") or GUIDANCE_DEFAULT)
        guidance_2 = params.get("guidance_2") if pair else None
        refusal = sampling_refusal(sampler, str(params.get("schedule") or MODEL_OWN))
        refusal = refusal or cfg_pp_refusal(
            sampler, guidance, None if guidance_2 is None else float(guidance_2)
        )
        if refusal is not None:
            raise InvalidRequest(refusal, node_id=node_id)

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> WanRequest:
        kwargs.setdefault("spatial_factor", _variant(sources).spatial_factor)
        return new_request(model_key, **kwargs)

    def flow_shift(self, scheduler: Source | None) -> float | None:
        return flow_shift(scheduler)

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
        """A render whose token sequence the split's ranks cannot share evenly."""
        if node_type != NODE_TYPE:
            return None
        return None if sources is None else sequence_refusal(params, _variant(sources), split)


def lora_info(handles: Sequence[LoraHandle]) -> list[dict[str, object]]:
    """A pair's stack as its take records it: each LoRA with the experts it adapted."""
    return [{**h.use.to_info(), "expert": h.expert} for h in handles]


def _variant(sources: Sources) -> WanVariant:
    transformer = sources.get("transformer")
    config = None if transformer is None else config_of(transformer)
    return variant_of(config, experts.is_pair(sources)) or T2V


def _no_image(sources: Sources) -> str:
    transformer = sources.get("transformer")
    config = None if transformer is None else config_of(transformer)
    title = "this Wan model" if config is None else model_title(config, experts.is_pair(sources))
    return (
        f"model {sources.model_name!r} ({title}) is text-to-video only: it takes no image. "
        "Unwire the image, or pick an image-to-video model (Wan 2.2 TI2V-5B, "
        "wan2.2_ti2v_5B_fp16.safetensors, or the Wan 2.2 A14B i2v pair, "
        "wan2.2_i2v_high_noise_14B_fp16.safetensors)"
    )


def _needs_image(kind: WanVariant) -> str:
    return (
        f"{kind.title} renders from an image: wire one into the 'image' input (it becomes the "
        "first frame), or pick a text-to-video model"
    )
