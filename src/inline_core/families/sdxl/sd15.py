"""SD 1.5 as its own family and node (`stability/sd15`), served by SDXL's code (torch-free).

One CLIP (CLIP-L, read at its last layer through its final layer norm by default, as ComfyUI's
SD 1.x CLIP and diffusers' `StableDiffusionPipeline` read it), 512 px by default, epsilon or v
prediction (a checkpoint's `v_pred` marker, a diffusers folder's scheduler config), no size
conditioning and no pooled prompt: `SDXLStepPipeline` runs it unchanged, its request, schedule,
samplers, img2img and inpaint included. Its all-in-one checkpoints are told by their keys
(`sd15_files.py`). It takes no LoRAs, no textual-inversion embeddings and no refiner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered
from inline_core.contract.files import StackRules
from inline_core.contract.sources import Resolution, Sources
from inline_core.contract.submit import Submit
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.comfy import sd_recipe
from inline_core.families.sdxl.descriptor import SDXL_DESCRIPTOR
from inline_core.families.sdxl.embeddings import named_embeddings
from inline_core.families.sdxl.family import SDXLFamily
from inline_core.families.sdxl.sd15_files import FAMILY, RULES, TITLE
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec

NODE_TYPE = "stability/sd15"
PREVIEW = "sd15"  # its latents' preview format (`diffusion/preview/formats.py`)
ONLY_SDXL = ("loras",)  # inputs of SDXL's node this one lacks
ONLY_SDXL_PARAMS = ("refiner", "refiner_switch")
SD15_DEFAULTS: dict[str, Any] = {"width": 512, "height": 512, "steps": 20, "clip_skip": -1}
LABELS = {"clip_skip": "CLIP layer (CLIPSetLastLayer: -1 the last, SD 1.5's own)"}


def _param(spec: ParamSpec) -> ParamSpec:
    if spec.name not in SD15_DEFAULTS:
        return spec
    return replace(spec, default=SD15_DEFAULTS[spec.name], label=LABELS.get(spec.name, spec.label))


SD15_DESCRIPTOR = replace(
    SDXL_DESCRIPTOR,
    type=NODE_TYPE,
    title="SD 1.5",
    inputs=tuple(p for p in SDXL_DESCRIPTOR.inputs if p.name not in ONLY_SDXL),
    params=tuple(_param(p) for p in SDXL_DESCRIPTOR.params if p.name not in ONLY_SDXL_PARAMS),
    description=(
        "Text to image with an SD 1.5 checkpoint (any community SD 1.5 checkpoint, or a "
        "diffusers StableDiffusionPipeline folder), 512 px by default. Prompts read as "
        "ComfyUI reads them: (words:1.2) weights, any length in 77-token windows. An image "
        "wired in renders image to image (strength: the share of the steps that run); a mask "
        "wired with it repaints the mask's white part. guidance is ComfyUI's cfg; sampler and "
        "schedule are ComfyUI's names; clip_skip is CLIPSetLastLayer's layer (-1, the last, "
        "by default). A vae picked replaces the checkpoint's."
    ),
)

RECIPE = sd_recipe(NODE_TYPE, "inline_core.families.sdxl.sd15_comfy:SD15Collapse")


class SD15Family(SDXLFamily):
    name = FAMILY
    title = TITLE
    node_type = NODE_TYPE
    builder = "inline_core.families.sdxl.sd15_build:BUILDER"
    kit = "inline_core.families.sdxl.kit_sd15:main"
    download = None
    loras = None
    capabilities = Capabilities(
        batching="shapes",  # a UNet takes one batched tensor: requests of one size share one
        preview_latents=frozenset({PREVIEW}),
        fp16_preferred=frozenset({"denoiser"}),
    )

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (SD15_DESCRIPTOR,)

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads | None:
        return None

    def resolve(self, node_type: str, params: Mapping[str, Any]) -> Resolution:
        return Family.resolve(self, node_type, params)  # no refiner to tell apart

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        lowered = super().lower(node_type, params, inputs, node_id, sources)
        if lowered.request.get("embeddings"):
            names = [e.name for e in lowered.request["embeddings"]]
            raise InvalidRequest(_no_embeddings(names), node_id=node_id)
        return lowered

    def check(self, submit: Submit) -> None:
        """A negative prompt that names embeddings is refused before the run starts."""
        names = named_embeddings([str(submit.params.get("negative_prompt") or "")])
        if names:
            raise InvalidRequest(_no_embeddings(names), node_id=submit.node_id)
        super().check(submit)

    def check_texts(self, node_type: str, texts: Mapping[str, Sequence[str]], node_id: str) -> None:
        """A prompt wired in (an `input/text`'s) that names embeddings, likewise: on every
        submit, for a text is never part of the check that is kept."""
        names = named_embeddings(list(texts.get("prompt", ())))
        if names:
            raise InvalidRequest(_no_embeddings(names), node_id=node_id)


def _no_embeddings(names: list[str]) -> str:
    return (
        f"the prompt names textual-inversion embeddings ({', '.join(names)}): {NODE_TYPE} reads "
        "none (SDXL's node reads SDXL's); write the words instead"
    )
