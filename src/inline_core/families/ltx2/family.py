"""LTX-2 as a family: its node, files, request and capabilities (torch-free).

`lightricks/ltx-2` renders text to video with its soundtrack: one transformer denoises the video's
latents and the sound's together (`pipeline.py`), the video VAE decodes the frames, the audio VAE
and the vocoder the sound. Its transformer takes one batched tensor per stream, so requests of
one video shape, frame rate included (the soundtrack's length follows from both), share a
forward. Its torch side is `build.py` (imported on the first render).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import StackRules
from inline_core.contract.lora_stacks import lora_handles
from inline_core.contract.sources import Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest, ModelMissing
from inline_core.families.ltx2 import comfy_ltx25, gemma_file
from inline_core.families.ltx2.cfg_pp import cfg_pp_refusal
from inline_core.families.ltx2.comfy import RECIPE
from inline_core.families.ltx2.descriptor import EXTRA_HINT, LTX2_DESCRIPTOR, NODE_TYPE
from inline_core.families.ltx2.download import DOWNLOADS
from inline_core.families.ltx2.files import RULES, prompt_tokens, vae_factors
from inline_core.families.ltx2.lora_naming import LTX2_LORAS
from inline_core.families.ltx2.ltx25 import check_ltx25
from inline_core.families.ltx2.manual_sigmas import parse_sigmas
from inline_core.families.ltx2.request import (
    SPATIAL_FACTOR,
    TEMPORAL_FACTOR,
    UPSCALE,
    LTX2Request,
    frames_refusal,
    new_request,
)
from inline_core.families.ltx2.single_file_config import SingleFileError, layout
from inline_core.families.ltx2.split import (
    SPLIT_ENGINES,
    SPLIT_METHODS,
    sequence_refusal,
    support_for,
)
from inline_core.families.ltx2.stack_version import stack_version
from inline_core.families.ltx2.upscale import (
    pass_stacks,
    refuse_idle_upsampler,
    upsampler_name,
    upsampler_path,
)
from inline_core.families.ltx2.versions import ONE_PASS, first_pass, refining_pass
from inline_core.families.nodes.inputs import image_input, prompt_text
from inline_core.families.nodes.video_params import check_encoders, whole_numbers
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.source import Source

PREVIEW_LATENTS = "ltxv"  # its video latents' format in diffusion/preview/formats.py

REQUEST_PARAMS = (
    "width",
    "height",
    "frames",
    "fps",
    "seed",
    "format",
)


class LTX2Family(Family):
    name = "ltx2"
    title = "LTX-2"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.ltx2.build:BUILDER"
    kit = "inline_core.families.ltx2.kit_command:main"
    download = "inline_core.families.ltx2.download:main"
    loras = LTX2_LORAS
    capabilities = Capabilities(
        batching="shapes",  # one batched tensor per stream: one video shape per forward
        chunked_decode=True,  # temporal chunks, each with its decoder's reach (decode.py)
        preview_latents=frozenset({PREVIEW_LATENTS}),  # the video's first frame
        step_cache=frozenset({"dbcache"}),  # per request, both streams (step_cache.py)
        # cache-dit's context parallelism (its LTX2 plan): Ulysses, Ring (split.py)
        split_methods=SPLIT_METHODS,
        split_engines=SPLIT_ENGINES,
        # Gemma 3 and LTX-2 are trained in bfloat16; Gemma's activations overflow float16.
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),
    )

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (LTX2_DESCRIPTOR,)

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads:
        return DOWNLOADS

    def model_param(self, node_type: str, params: Mapping[str, Any]) -> str | None:
        value = params.get("model")
        if value:
            return str(value)
        models = self.files.models()
        return models[0].name if models else None

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        if node_type != NODE_TYPE:
            raise InvalidRequest(f"LTX-2 has no node {node_type!r}", node_id=node_id)
        transformer, encoder = sources.get("transformer"), sources.get("text_encoder")
        decoder = check_ltx25(transformer, encoder, node_id, self.files.catalog)
        version = stack_version(sources.get("transformer"), decoder)
        image = image_input(inputs, "image", node_id)
        # The params left to the model: its version's template's (versions.py).
        sampling = first_pass(params, version, image is not None)
        request: dict[str, Any] = {
            "prompt": prompt_text(inputs.get("prompt"), node_id),
            "negative_prompt": str(params.get("negative_prompt") or ""),
            **{name: params.get(name) for name in REQUEST_PARAMS},
            **{name: sampling[name] for name in ONE_PASS},
            "sigma_schedule": str(params.get("schedule") or "simple"),
        }
        for name, spec in ((p.name, p) for p in LTX2_DESCRIPTOR.params):
            if name in request and request[name] is None:
                request[name] = spec.default
        whole_numbers(request)
        request["guidance"] = float(request["guidance"])
        request["audio_guidance"] = float(request["audio_guidance"])
        if sampling["sigmas"]:
            request["first_sigmas"] = parse_sigmas(str(sampling["sigmas"]), node_id)
            request["steps"] = len(request["first_sigmas"])
        take_params = dict(request)
        take_params["model_version"] = version  # whose recipe filled what params left
        if decoder is not None:  # LTX-2.5: its video decoder is a diffusion model (ltx25.py)
            request["diffusion_decoder"] = str(decoder)
        take_params["image_to_video"] = image is not None
        if image is not None:
            request["image"] = image
        handles = lora_handles(inputs.get("loras"), self.name, self.title, node_id)
        upscale = bool(params.get("upscale"))
        refuse_idle_upsampler(params, node_id)
        loras, refine = pass_stacks(handles, upscale, self.title, node_id)
        if loras:
            request["loras"] = loras
            take_params["loras"] = stack_info(loras)
        if upscale:
            catalog = self.files.catalog
            upsampler = upsampler_path(
                params, sources.get("transformer"), catalog, node_id, version
            )
            refine_sigmas, refine_sampler = refining_pass(params, version, image is not None)
            request.update(
                upscale=True,
                upsampler=str(upsampler),
                refine_sigmas=parse_sigmas(refine_sigmas, node_id, "refine_sigmas"),
                refine_loras=refine,
                refine_sampler=refine_sampler,
            )
            take_params.update(
                upscale=True,
                upscale_model=upsampler_name(upsampler, catalog),  # which upsampler ran
                refine_sigmas=refine_sigmas,
                refine_loras=stack_info(refine),
                refine_sampler=refine_sampler,
            )
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        params, node_id = submit.params, submit.node_id
        # Each LoRA on a pass (`expert`): the first, the refining one, or both with `upscale`.
        handles = lora_handles(submit.loras, self.name, self.title, node_id)
        pass_stacks(handles, bool(params.get("upscale")), self.title, node_id)
        refuse_idle_upsampler(params, node_id)
        if params.get("sigmas"):
            parse_sigmas(str(params["sigmas"]), node_id)
        elif params.get("steps") == 1 and (params.get("schedule") or "simple") == "simple":
            # LTX2Pipeline's sigmas stretch to a terminal by the last step's distance from 1:
            # one step has none, and diffusers' scheduler divides by it (every sigma NaN).
            raise InvalidRequest(
                "param 'steps' must be at least 2 on LTX-2's own schedule ('simple'): its "
                "sigmas stretch to a terminal level, which one step cannot; pick another "
                "schedule or give 'sigmas' for a single step",
                node_id=node_id,
            )
        for name in ("refine_sampler", "refine_sigmas"):
            if params.get(name) and not params.get("upscale"):
                raise InvalidRequest(
                    f"param {name!r} sets the two-stage upscale's refining pass: set 'upscale' too",
                    node_id=node_id,
                )
        if params.get("refine_sigmas"):
            parse_sigmas(str(params["refine_sigmas"]), node_id, "refine_sigmas")
        if submit.node_type != NODE_TYPE:
            return
        silent = "a lossless animated PNG, its sound a take of its own"
        check_encoders(params, node_id, silent, audio=True)
        sources = submit.sources
        # Before the missing parts are named: a part missing from the file is the file's fault.
        transformer = (
            sources.get("transformer")
            if sources is not None
            else self.files.found(self.model_param(NODE_TYPE, params)).parts.get("transformer")
        )
        check_single_file(transformer, node_id)
        encoder = None if sources is None else sources.get("text_encoder")
        check_encoder_file(encoder, node_id)
        decoder = check_ltx25(transformer, encoder, node_id, self.files.catalog)
        version = stack_version(transformer, decoder)
        refuse_cfg_pp(params, version, "image" in submit.wired, node_id)
        factors = None if sources is None else vae_factors(sources.get("vae"))
        spatial, temporal = factors or (SPATIAL_FACTOR, TEMPORAL_FACTOR)
        if params.get("upscale"):
            upsampler_path(params, transformer, self.files.catalog, node_id, version)
            spatial *= UPSCALE  # the first pass renders at half the size
        frames = params.get("frames")
        if frames is not None:
            refusal = frames_refusal(int(frames), temporal)
            if refusal is not None:
                raise InvalidRequest(refusal, node_id=node_id)
        for name in ("width", "height"):
            value = params.get(name)
            if value is not None and int(value) % spatial:
                raise InvalidRequest(
                    f"param '{name}' must be a multiple of {spatial} for this LTX-2 model and "
                    f"render (its VAE's factor, twice that for 'upscale'), got {value}",
                    node_id=node_id,
                )

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> LTX2Request:
        factors = vae_factors(sources.get("vae"))
        if factors is not None:
            kwargs.setdefault("spatial_factor", factors[0])
            kwargs.setdefault("temporal_factor", factors[1])
        # As the pipeline pads it (a worker group's request is made here, not by the pipeline).
        kwargs.setdefault("max_prompt_tokens", prompt_tokens(sources.get("tokenizer")))
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
        """A render whose video, soundtrack or prompt the split's ranks cannot share evenly."""
        if node_type != NODE_TYPE or sources is None:
            return None
        defaults = {p.name: p.default for p in LTX2_DESCRIPTOR.params}
        return sequence_refusal(params, defaults, sources, split)


def refuse_cfg_pp(params: Mapping[str, Any], version: str, image: bool, node_id: str) -> None:
    """A CFG++ sampler on a pass or stream that runs unguided, as the render resolves its
    sampler and guidances (the version's where the params leave them): a 422 naming it."""
    sampling = first_pass(params, version, image)
    refine = refining_pass(params, version, image)[1] if params.get("upscale") else None
    refusal = cfg_pp_refusal(
        str(sampling["sampler"]),
        float(sampling["guidance"]),
        float(sampling["audio_guidance"]),
        refine,
    )
    if refusal is not None:
        raise InvalidRequest(refusal.message, node_id=node_id)


def check_single_file(transformer: Source | None, node_id: str) -> None:
    """A transformer in a file must be ComfyUI's all-in-one file, whole: a 422 naming the file
    and what it lacks, before the run."""
    if transformer is None or not transformer.is_file:
        return
    if transformer.view is None:
        raise InvalidRequest(
            f"the LTX-2 diffusion model {transformer.path} is a file of the transformer alone: "
            "LTX-2 reads ComfyUI's all-in-one file (checkpoints/ltx-2*.safetensors) or a "
            "diffusers folder",
            node_id=node_id,
        )
    try:
        layout(transformer.path)
    except SingleFileError as exc:
        raise ModelMissing(
            f"the LTX-2 file {transformer.path} cannot be read: {exc}", node_id=node_id
        ) from exc


def check_encoder_file(encoder: Source | None, node_id: str) -> None:
    """ComfyUI's Gemma file must be whole and of a precision this server reads: a 422 naming
    the file and what it lacks, before the run."""
    if encoder is None or not encoder.is_file:
        return
    # ComfyUI's LTX-2.5 Gemma 4 file has what tells a Gemma 3 file (`comfy_ltx25.py`).
    ltx25 = comfy_ltx25.refusal(encoder.path)
    if ltx25 is not None:
        raise ModelMissing(f"the text encoder {encoder.path} is not read: {ltx25}", node_id=node_id)
    if not gemma_file.is_gemma_file(encoder.path):
        return
    problem = gemma_file.problem(encoder.path)
    if problem is not None:
        raise ModelMissing(
            f"the Gemma 3 text encoder {encoder.path} cannot be read: {problem}", node_id=node_id
        )
