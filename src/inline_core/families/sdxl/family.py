"""SDXL as a family: its node, files, request and capabilities (torch-free).

`stability/sdxl` renders text to image with an SDXL UNet (an all-in-one checkpoint in the
original Stability naming, split files, or a diffusers folder), sampled through the shared sigma
library (`diffusion/sigma/`) with ComfyUI's samplers and schedules. Its UNet takes one batched
tensor, so requests of one latent size share a forward; each request's kohya LoRAs adapt its own
rows of it and its own prompts (`lora_naming.py`). It has no DiT step cache and no
sequence split. Its torch side is `build.py` (imported on the first render).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import SCHEDULER, StackRules
from inline_core.contract.sources import Missing, Resolution, Sources
from inline_core.contract.submit import Submit
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest, NotFound
from inline_core.families.nodes.inputs import image_input, prompt_text, wired_loras
from inline_core.families.sdxl.comfy import RECIPE
from inline_core.families.sdxl.descriptor import (
    CHECKPOINT_PREDICTION,
    EXTRA_HINT,
    NODE_TYPE,
    SDXL_DESCRIPTOR,
)
from inline_core.families.sdxl.download import DOWNLOADS
from inline_core.families.sdxl.embeddings import find_embeddings
from inline_core.families.sdxl.files import RULES, own_prediction, refiner_refusal
from inline_core.families.sdxl.hires import hires_pass, hires_refusal
from inline_core.families.sdxl.lora_naming import SDXL_LORAS
from inline_core.families.sdxl.refiner import REFINER, switch_refusal, with_refiner
from inline_core.families.sdxl.request import (
    ZSNR_ALONE,
    SDXLRequest,
    img2img_start,
    new_request,
)
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, cfg_pp_unguided

REQUEST_PARAMS = (
    "width",
    "height",
    "steps",
    "guidance",
    "sampler",
    "schedule",
    "clip_skip",
    "seed",
)


class SDXLFamily(Family):
    name = "sdxl"
    title = "SDXL"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    loras = SDXL_LORAS
    builder = "inline_core.families.sdxl.build:BUILDER"
    kit = "inline_core.families.sdxl.kit:main"
    download = "inline_core.families.sdxl.download:main"
    runs_cfg_pp = True  # its step hands a CFG++ sampler the unconditional prediction
    capabilities = Capabilities(
        batching="shapes",  # a UNet takes one batched tensor: requests of one size share one
        preview_latents=frozenset({"sdxl"}),
        fp16_preferred=frozenset({"denoiser"}),
    )

    node_type: ClassVar[str] = NODE_TYPE  # its one node (SD 1.5's family serves its own)

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (SDXL_DESCRIPTOR,)

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads | None:
        return DOWNLOADS

    def resolve(self, node_type: str, params: Mapping[str, Any]) -> Resolution:
        """A refiner checkpoint picked as the model is said for what it is (its missing CLIP-L
        is not the point); one picked as the `refiner` adds its parts (`refiner.py`)."""
        model = self.model_param(node_type, params)
        try:
            picked = self.catalog.entry("checkpoints", model).path if model else None
        except NotFound:
            picked = None
        refusal = refiner_refusal(picked)
        if refusal is not None:
            return Resolution(self.title, None, (Missing("diffusion model", refusal),))
        refiner = params.get("refiner")
        if not refiner:
            return super().resolve(node_type, params)
        picks = self.files.picks_of(params)
        found = self.files.found(model, picks)
        missing = list(found.missing)
        parts = with_refiner(found.parts, str(refiner), self.catalog, "vae" in picks, missing)
        if any(source is None for name, source in parts.items() if name != SCHEDULER):
            return Resolution(self.title, None, tuple(missing))
        return Resolution(self.title, Sources.of(self.name, found.name, parts), tuple(missing))

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        if node_type != self.node_type:
            raise InvalidRequest(f"{self.title} has no node {node_type!r}", node_id=node_id)
        request: dict[str, Any] = {
            "prompt": prompt_text(inputs.get("prompt"), node_id),
            "negative_prompt": str(params.get("negative_prompt") or ""),
            **{name: params[name] for name in REQUEST_PARAMS},
        }
        request |= prediction_fields(params)
        image = image_input(inputs, "image", node_id)
        take_params = {**request, "img2img": image is not None}
        texts = (request["prompt"], request["negative_prompt"])
        embeddings = find_embeddings(self.catalog, texts, node_id)
        if embeddings:
            request["embeddings"] = embeddings
            take_params["embeddings"] = [e.name for e in embeddings]
        loras = wired_loras(inputs, self.name, self.title, node_id)
        if loras:
            request["loras"] = loras
            take_params["loras"] = stack_info(loras)
        if image is not None:
            request |= {"image": image, "strength": float(params["strength"])}
            take_params["strength"] = request["strength"]
        mask = image_input(inputs, "mask", node_id)
        if mask is not None:
            request["mask"] = mask
            take_params["inpaint"] = True
        if sources.get(REFINER) is not None:
            request["refiner_switch"] = float(params["refiner_switch"])
            take_params["refiner_switch"] = request["refiner_switch"]
        hires = hires_pass(params)
        if hires is not None:
            request["hires"] = hires
            take_params["hires"] = dataclasses.asdict(hires)
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        super().check(submit)
        if submit.node_type != self.node_type:
            return
        fields = prediction_fields(submit.params)
        if bool(submit.params.get("zsnr")) and not fields:
            raise InvalidRequest(ZSNR_ALONE, node_id=submit.node_id)
        sampler = str(submit.params.get("sampler") or "")
        if sampler in CFG_PP_SAMPLERS and float(submit.params["guidance"]) == 1.0:
            raise InvalidRequest(cfg_pp_unguided(sampler), node_id=submit.node_id)
        if submit.params.get("refiner"):
            self._check_refiner(submit)
        self._check_hires(submit)
        if "mask" in submit.wired and "image" not in submit.wired:
            raise InvalidRequest(
                "a mask needs the image it masks: wire the image to inpaint", node_id=submit.node_id
            )
        mask, image = submit.sizes.get("mask"), submit.sizes.get("image")
        if mask is not None and image is not None and mask != image:
            raise InvalidRequest(
                f"the mask is {mask[0]}x{mask[1]} and the image {image[0]}x{image[1]}: they "
                "must be the same size",
                node_id=submit.node_id,
            )
        if "image" not in submit.wired:
            return
        steps, strength = int(submit.params["steps"]), float(submit.params["strength"])
        if steps - img2img_start(steps, strength) < 1:
            raise InvalidRequest(
                f"strength {strength:g} with an image wired leaves no step to run out of "
                f"{steps}: raise the strength (0 would return the image unchanged) or the steps",
                node_id=submit.node_id,
            )

    def _check_refiner(self, submit: Submit) -> None:
        refusal = switch_refusal(float(submit.params["refiner_switch"]))
        if refusal is None and "mask" in submit.wired:
            refusal = (
                "a refiner with a mask wired: stability/sdxl inpaints with the base model "
                "alone; clear the refiner or the mask"
            )
        if refusal is None and not prediction_fields(submit.params):
            refusal = _mixed_prediction(submit.sources)
        if refusal is not None:
            raise InvalidRequest(refusal, node_id=submit.node_id)

    def _check_hires(self, submit: Submit) -> None:
        hires = hires_pass(submit.params)
        if hires is None:
            return
        refusal = hires_refusal(hires)
        if refusal is None and submit.params.get("refiner"):
            refusal = (
                "a hires pass with a refiner picked: the second pass samples the base model "
                "alone; clear the refiner or set hires_width and hires_height to 0"
            )
        if refusal is None and "mask" in submit.wired:
            refusal = (
                "a hires pass with a mask wired: inpainting runs at the mask's own size; set "
                "hires_width and hires_height to 0"
            )
        if refusal is not None:
            raise InvalidRequest(refusal, node_id=submit.node_id)

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> SDXLRequest:
        return new_request(model_key, **kwargs)


def _mixed_prediction(sources: Sources | None) -> str | None:
    """A refiner whose checkpoint samples otherwise than the base's (eps against v-prediction, or
    zero terminal SNR on one alone): the render walks one noise table with one prediction type,
    so it is refused rather than one model misread."""
    base = None if sources is None else sources.get("transformer")
    refiner = None if sources is None else sources.get(REFINER)
    if sources is None or base is None or refiner is None:
        return None
    theirs, ours = own_prediction(refiner), own_prediction(base, sources.get(SCHEDULER))
    if theirs == ours:
        return None
    return (
        f"the refiner {refiner.location.name!r} predicts {theirs} and the base "
        f"{sources.model_name!r} {ours}: one render samples one prediction type over both "
        "models, so stability/sdxl does not mix them; pick a refiner of the base's kind, or set "
        "prediction (ModelSamplingDiscrete), which both models are then sampled with"
    )


def prediction_fields(params: Mapping[str, Any]) -> dict[str, Any]:
    """The node's ModelSamplingDiscrete (`prediction` and `zsnr`) as the request takes them:
    nothing where it keeps the checkpoint's own."""
    prediction = params.get("prediction")
    if prediction in (None, CHECKPOINT_PREDICTION):
        return {}
    return {"prediction": str(prediction), "zsnr": bool(params.get("zsnr"))}
