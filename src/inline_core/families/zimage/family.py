"""Z-Image Turbo as a family: its node, files, request and capabilities (torch-free).

`alibaba/z-image-turbo` renders text to image, or image to image when an image is wired in. Its
torch side is `build.py` (imported on the first render); its low-level files serve the shared
primitive vocabulary too (`load/*`, `encode/text`, `sample`, `vae/*`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import StackRules, read_json
from inline_core.contract.sources import Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.diffusion.flow.steps import img2img_start
from inline_core.diffusion.formats import ldm_vae
from inline_core.downloads.targets import Downloads
from inline_core.errors import InlineError, InvalidRequest
from inline_core.families.nodes.inputs import prompt_text, wired_loras
from inline_core.families.nodes.sampling import refuse_cfg_pp
from inline_core.families.zimage import control_inputs, controlnet
from inline_core.families.zimage.comfy import RECIPE
from inline_core.families.zimage.control_files import (
    control_config,
    control_entry,
    control_use,
    split_refusal,
)
from inline_core.families.zimage.controlnet import ControlUse
from inline_core.families.zimage.descriptor import EXTRA_HINT, NODE_TYPE, ZIMAGE_DESCRIPTOR
from inline_core.families.zimage.download import DOWNLOADS
from inline_core.families.zimage.files import RULES, flow_shift
from inline_core.families.zimage.lora_naming import ZIMAGE_LORAS
from inline_core.families.zimage.request import LATENT_FACTOR, ZImageRequest, new_request
from inline_core.families.zimage.split import SPLIT_METHODS, support_for
from inline_core.families.zimage.transformer import config_of
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.primitives import LOAD_CONTROLNET
from inline_core.models.source import Source

# Request fields that are inputs, not settings: kept off the take's params.
_NOT_TAKE_PARAMS = ("image", "loras", *control_inputs.INPUT_FIELDS)


class ZImageFamily(Family):
    name = "z-image"
    title = "Z-Image"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.zimage.build:BUILDER"
    runs_step_windows = True  # its sample runs KSamplerAdvanced's windows
    runs_model_shift = runs_cfg_pp = True  # a request's shift; CFG++ samplers
    comfy_text_encoder_types = ("lumina2",)  # how ComfyUI loads its Qwen3 text encoder
    kit = "inline_core.families.zimage.kit:main"
    download = "inline_core.families.zimage.download:main"
    loras = ZIMAGE_LORAS
    tools_default = True  # `inline-core kit` / `download` without --family
    capabilities = Capabilities(
        batching="lists",  # its transformer takes per-request lists: any sizes share a forward
        split_methods=SPLIT_METHODS,
        split_engines=frozenset({"cache-dit", "xfuser"}),
        preview_latents=frozenset({"flux"}),
        # Its diffusers transformer and Qwen3 overflow float16.
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),
        primitives=True,
        step_cache=frozenset({"dbcache"}),  # per request, on its main blocks (step_cache.py)
    )

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (ZIMAGE_DESCRIPTOR,)

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
            raise InvalidRequest(f"Z-Image has no node {node_type!r}", node_id=node_id)
        image = control_inputs.image_input(inputs, "image", node_id)
        request: dict[str, Any] = {
            "prompt": prompt_text(inputs.get("prompt"), node_id),
            "negative_prompt": str(params.get("negative_prompt") or ""),
            "width": int(params["width"]),
            "height": int(params["height"]),
            "steps": int(params["steps"]),
            "guidance": float(params["guidance"]),
            "seed": int(params["seed"]),
            "sampler": str(params["sampler"]),
            "sigma_schedule": str(params["schedule"]),
        }
        if image is not None:
            request["image"] = image
            request["strength"] = float(params["strength"])
        loras = wired_loras(inputs, self.name, self.title, node_id)
        if loras:
            request["loras"] = loras
        control = control_inputs.lower(self.catalog, params, inputs, node_id)
        request |= control
        if request.get("image") is None:  # none wired, or it feeds the control instead
            request.pop("image", None)
            request.pop("strength", None)
        take_params = {k: v for k, v in request.items() if k not in _NOT_TAKE_PARAMS}
        take_params["img2img"] = "image" in request
        take_params |= control_inputs.take_params(control)
        if loras:
            take_params["loras"] = stack_info(loras)
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        super().check(submit)  # its LoRAs
        if submit.node_type != NODE_TYPE:
            return
        params, wired, node_id = submit.params, submit.wired, submit.node_id
        guides = float(params["guidance"]) > 0
        refuse_cfg_pp(params.get("sampler"), guides, "Z-Image", node_id, guided_from="above 0")
        transformer = _transformer_config(submit.sources) if params.get("controlnet") else None
        control_inputs.check_wired(self.catalog, params, wired, transformer, node_id)
        if "mask" in submit.sizes and "image" in submit.sizes:
            control_inputs.same_size(submit.sizes["mask"], submit.sizes["image"], node_id)
        if "image" not in wired:
            return
        steps, strength = int(params["steps"]), float(params["strength"])
        if steps - img2img_start(steps, strength) < 1:
            raise InvalidRequest(
                f"strength {strength:g} with an image wired leaves no step to run out of "
                f"{steps}: raise the strength (0 would return the image unchanged) or the steps",
                node_id=node_id,
            )

    def params_identity(self, node_type: str, params: Mapping[str, Any]) -> str:
        return control_inputs.params_identity(self.catalog, params)

    def unsplittable(
        self,
        node_type: str,
        params: Mapping[str, Any],
        split: ParallelSpec,
        sources: Sources | None,
        images: Mapping[str, tuple[int, int] | None] | None = None,
    ) -> str | None:
        key = "controlnet" if node_type == NODE_TYPE else "name"  # the node's, load/controlnet's
        name = params.get(key) if node_type in (NODE_TYPE, LOAD_CONTROLNET.type) else None
        return split_refusal(str(name)) if name else None

    def control_use(self, name: str, strength: float, node_id: str | None) -> ControlUse:
        entry = control_entry(self.catalog, name, node_id)
        control_config(entry, None, node_id)
        return control_use(entry, strength)

    def control_inpaints(self, name: str) -> bool | None:
        try:
            config = control_config(control_entry(self.catalog, name, None), None, None)
        except InlineError:
            return None
        return controlnet.takes_inpaint(config, control_inputs.LATENT_CHANNELS)

    def check_control_inputs(self, name: str, wired: frozenset[str], node_id: str) -> None:
        inpaint = wired & {"mask", "inpaint_image"}
        if inpaint and self.control_inpaints(name) is False:
            raise InvalidRequest(controlnet.no_inpaint(name), node_id=node_id)

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> ZImageRequest:
        factor = _vae_factor(sources.get("vae")) if stack == "node" else LATENT_FACTOR
        return new_request(model_key, factor or LATENT_FACTOR, **kwargs)

    def denoiser_fit(self, transformer: Source) -> tuple[int, int] | None:
        config = config_of(transformer)
        width = None if config is None else config.get("cap_feat_dim")
        channels = None if config is None else config.get("in_channels")
        if not isinstance(width, int) or not isinstance(channels, int):
            return None  # unreadable: the loader will say why
        return width, channels

    def flow_shift(self, scheduler: Source | None) -> float | None:
        return flow_shift(scheduler)

    def guidance_for_cfg(self, cfg: float, transformer: Source | None = None) -> float:
        """ComfyUI guides with `uncond + cfg * (cond - uncond)`, Z-Image with `cond + g * (cond -
        uncond)`: both are `uncond + (1 + g) * (cond - uncond)`, so `g = cfg - 1`. cfg 1 is no
        guidance in both counts, and cfg below 1 is not offered (Z-Image's guidance is >= 0)."""
        return max(cfg - 1.0, 0.0)

    def split_support(self, transformer: Source | None) -> ModelParallelSupport:
        return support_for(transformer)


def _vae_factor(source: Source | None) -> int | None:
    """Pixels per latent along each side, read from the VAE's files (8 for the FLUX VAE)."""
    if source is None:
        return None
    if source.is_file:
        from inline_core.diffusion.files.shapes import read_shapes

        shapes = read_shapes(source.path, source.view)
        if shapes is None or not ldm_vae.is_ldm_vae(shapes):
            return None
        return ldm_vae.spatial_factor(ldm_vae.infer_config(shapes))
    config = read_json(source.location / "config.json")
    return None if config is None else ldm_vae.spatial_factor(config)


def _transformer_config(sources: Sources | None) -> dict[str, Any] | None:
    """The config of the transformer a node's files name (None: not found or unreadable)."""
    transformer = None if sources is None else sources.get("transformer")
    return None if transformer is None else config_of(transformer)
