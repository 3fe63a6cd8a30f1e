"""What of SDXL's ComfyUI chain the recipe's data does not reach (`comfy.py`'s reader).

- The model comes from a CheckpointLoaderSimple (`checkpoints/`), whose CLIP and VAE are the
  checkpoint's own: the prompts' and the decoder's must be that same checkpoint's (or a
  VAELoader's file, the node's `vae`).
- LoraLoaders become `input/lora` nodes with both strengths: `strength_model` on the UNet, and
  `strength_clip` on the text encoders where the loader's CLIP output is on the prompts' way (0
  where it is not, as ComfyUI then encodes without it).
- CLIPSetLastLayer on the prompts' way is the node's `clip_skip`.
- KSampler's sampler_name and scheduler are the node's `sampler` and `schedule` (ComfyUI's
  names); one the node does not offer is refused naming the closest. A denoise below 1 is listed
  as changing the picture.
- SDXL Turbo's SamplerCustom (KSamplerSelect, SDTurboScheduler or BasicScheduler) maps exactly
  or is refused naming the node (`comfy_custom.py`).
- VAEEncodeForInpaint and SetLatentNoiseMask are the node's image and mask, their differences
  listed (`comfy_inpaint.py`).
- The base + refiner chain (two KSamplerAdvanced stages) is the node's `refiner` and
  `refiner_switch` (`comfy_refiner.py`).
- The hires fix (a LatentUpscale or LatentUpscaleBy between two KSamplers) is the node's
  `hires_*` params (`comfy_hires.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from inline_core.families.sdxl.comfy import CHECKPOINT_LOADER, CLIP_LAYER
from inline_core.families.sdxl.comfy_custom import CUSTOM, custom_sampling
from inline_core.families.sdxl.comfy_hires import hires_sampling, linked_node, upscaled_by
from inline_core.families.sdxl.comfy_inpaint import INPAINT_LATENTS, inpaint_inputs
from inline_core.families.sdxl.comfy_refiner import (
    decoder_note,
    refiner_loader,
    refiner_params,
    staged_sampling,
)
from inline_core.families.sdxl.descriptor import PREDICTION_OVERRIDES
from inline_core.families.sdxl.request import DEFAULT_CLIP_SKIP
from inline_core.graph.sampler_names import GUIDED_SAMPLERS, SCHEDULES
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import LORA_LOADERS, Collapse, Sampling
from inline_core.importer.recognise import MODEL_LOADERS
from inline_core.importer.samplers import exact_name
from inline_core.importer.stages import ADVANCED
from inline_core.importer.values import Port, describe
from inline_core.importer.workflow import ComfyNode

MODEL_SAMPLING = "ModelSamplingDiscrete"  # its sampling and zsnr: the node's own
DEFAULT_SAMPLER, DEFAULT_SCHEDULE = "euler", "normal"


class SDXLCollapse(Collapse):
    SAMPLERS: ClassVar[tuple[str, ...]] = ("KSampler", ADVANCED, CUSTOM)

    def run(self) -> str:
        node_id = super().run()
        for node in self.nodes.values():  # a second model makes more than SDXL's image
            if node.class_type in MODEL_LOADERS and node.id not in self.read:
                raise UnsupportedNode(
                    f"{describe(node)} loads a model off the chain to {self.descriptor.type} "
                    f"(what this workflow makes with it, e.g. a video from the image, is not "
                    f"{self.descriptor.type}'s): only SDXL's own chain imports"
                )
        return node_id

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clip_loras: set[str] = set()  # LoraLoaders on the prompts' way
        self.checkpoints: dict[str, ComfyNode] = {}  # whose CLIP or VAE the chain reads
        self.clip_skip: int | None = None

    def sampling(self, sampler: ComfyNode) -> Sampling:
        if sampler.class_type == CUSTOM:  # SDXL Turbo's template
            return custom_sampling(self.mapper, sampler, self.required)
        latent = linked_node(self, sampler, "latent_image")
        if sampler.class_type == "KSampler" and upscaled_by(latent):  # `comfy_hires.py`
            return hires_sampling(self, sampler, self.sampling)
        if sampler.class_type == ADVANCED:  # the base + refiner template (`comfy_refiner.py`)
            found = staged_sampling(self, sampler)
        else:
            found = super().sampling(sampler)
        m, where = self.mapper, describe(found.first)
        name = m.text(found.first, "sampler_name", DEFAULT_SAMPLER)
        schedule = m.text(found.first, "scheduler", DEFAULT_SCHEDULE)
        # One to one: a name the node does not run is a 422 naming it, never another sampler.
        found.extra["sampler"] = exact_name("sampler", name, GUIDED_SAMPLERS, where)
        found.extra["schedule"] = exact_name("scheduler", schedule, SCHEDULES, where)
        return found

    def sampling_notes(self, sampler: ComfyNode) -> None:
        if sampler.class_type == CUSTOM:
            return  # mapped exactly, or refused (`comfy_custom.py`)
        m = self.mapper  # its sampler and scheduler: the node's own, or refused (`sampling`)
        denoise = m.number(sampler, "denoise", 1.0)
        inpaints = linked_node(self, sampler, "latent_image")
        if denoise < 1.0 and (inpaints is None or inpaints.class_type not in INPAINT_LATENTS):
            m.substituted(sampler, f"denoise {denoise:g} is not offered; the whole schedule runs")

    def latent(self, sampler: ComfyNode, params: dict[str, Any]) -> Port | None:
        """EmptyLatentImage's size, or an inpaint chain's image and mask (`comfy_inpaint.py`)."""
        node = self.required(sampler, "latent_image")
        if node.class_type not in INPAINT_LATENTS:
            return super().latent(sampler, params)
        encode, image, mask = inpaint_inputs(self.mapper, node, sampler, self.required, params)
        vae = self.source(encode, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        self.images["mask"] = (node.id, mask)
        return image

    def through_loras(self, node: ComfyNode, name: str) -> ComfyNode:
        """The prompts' CLIP way: its LoraLoaders and CLIPSetLastLayer, to the checkpoint."""
        while node.class_type in (*LORA_LOADERS, CLIP_LAYER):
            if node.class_type == CLIP_LAYER:
                layer = self.mapper.whole(node, "stop_at_clip_layer", -1)
                if self.clip_skip is None:  # the one nearest the prompt wins, as in ComfyUI
                    self.clip_skip = layer
            else:
                self.clip_loras.add(node.id)
            node = self.required(node, name)
        return node

    def part(self, loader: ComfyNode) -> None:
        if loader.class_type == CHECKPOINT_LOADER:  # the checkpoint's own CLIP or VAE
            self.checkpoints[loader.id] = loader
            return
        super().part(loader)

    def model_way(self, sampler: ComfyNode) -> tuple[dict[str, Any], list[ComfyNode], ComfyNode]:
        """Its LoraLoaders and ModelSamplingDiscrete (the one nearest the sampler wins, as in
        ComfyUI: the node's `prediction` and `zsnr`), to the checkpoint."""
        node = self.required(sampler, "model")
        adapters: list[ComfyNode] = []
        values: dict[str, Any] = {}
        while node.class_type in (*LORA_LOADERS, MODEL_SAMPLING):
            if node.class_type != MODEL_SAMPLING:
                adapters.append(node)
            elif not values:
                values = self._model_sampling(node)
            node = self.required(node, "model")
        self.expect(node, CHECKPOINT_LOADER)
        return values, adapters[::-1], node

    def _model_sampling(self, node: ComfyNode) -> dict[str, Any]:
        m = self.mapper
        sampling = m.text(node, "sampling", "eps")
        if sampling not in PREDICTION_OVERRIDES:
            raise UnsupportedNode(
                f"{describe(node)}: sampling {sampling!r} is not offered; "
                f"{self.descriptor.type} runs {' or '.join(PREDICTION_OVERRIDES)}"
            )
        return {"prediction": sampling, "zsnr": m.literal(node, "zsnr") is True}

    def model(self, sampling: Sampling, node_id: str) -> dict[str, Any]:
        values, adapters, node = self.model_way(sampling.first)
        refiner = None if sampling.last is None else self._refiner(sampling.first, sampling.last)
        self._same_checkpoint(node, refiner)
        on_model = {n.id for n in adapters}
        for lora_id in sorted(self.clip_loras - on_model):
            raise UnsupportedNode(
                f"{describe(self.nodes[lora_id])} is on the prompts' way only, not on the "
                f"model's: {self.descriptor.type} applies a LoRA to its UNet and its text "
                "encoders together (LoraLoader's two strengths); wire its MODEL output too"
            )
        self.loras = [self.lora(n) for n in adapters]
        params: dict[str, Any] = {**values, self.recipe.names.model: self.model_file(node, node_id)}
        if self.clip_skip is not None:
            params["clip_skip"] = self.clip_skip
        if refiner is not None:
            params |= refiner_params(self, refiner, node_id)
        return params

    def _refiner(self, first: ComfyNode, last: ComfyNode) -> ComfyNode:
        """The refiner stage's checkpoint; its prompts' CLIP way may add no LoRA and no other
        layer than the base's (the node reads both encoders at one `clip_skip`)."""
        prompts = (self.prompt(first, "positive"), self.prompt(first, "negative"))
        base_layer, base_loras = self.clip_skip, set(self.clip_loras)
        self.clip_skip = None
        refiner = refiner_loader(self, last, prompts)
        layer, self.clip_skip = self.clip_skip, base_layer
        if self.clip_loras != base_loras:
            raise UnsupportedNode(
                f"{describe(last)}: a LoraLoader adapts the refiner's CLIP; the node's LoRAs "
                "adapt the base model alone"
            )
        if layer is not None and layer != (base_layer or DEFAULT_CLIP_SKIP):
            raise UnsupportedNode(
                f"{describe(last)}: its prompts read CLIP layer {layer}, the base's "
                f"{base_layer or DEFAULT_CLIP_SKIP}; the node reads both at one clip_skip"
            )
        if self.mapper.text(refiner, "ckpt_name") == self.mapper.text(
            self.model_way(first)[2], "ckpt_name"
        ):
            raise UnsupportedNode(
                f"{describe(last)}: both stages sample one checkpoint; two stages import as "
                "SDXL's base and its refiner, each on its own CheckpointLoaderSimple"
            )
        decoder_note(self, last, refiner)
        return refiner

    def _same_checkpoint(self, model: ComfyNode, refiner: ComfyNode | None = None) -> None:
        m, wanted = self.mapper, self.mapper.text(model, "ckpt_name")
        refined = None if refiner is None else m.text(refiner, "ckpt_name")
        for other in self.checkpoints.values():
            if refiner is not None and m.text(other, "ckpt_name") == refined:
                if other.id != refiner.id:
                    m.skip(other, f"the same checkpoint as {describe(refiner)}")
                continue
            if other.id != model.id and m.text(other, "ckpt_name") != wanted:
                raise UnsupportedNode(
                    f"{describe(other)} loads {m.text(other, 'ckpt_name')!r} for the prompts or "
                    f"the decoder, and {describe(model)} the model {wanted!r}: "
                    f"{self.descriptor.type} reads a checkpoint's own text encoders and VAE (a "
                    "VAELoader picks another VAE)"
                )
            if other.id != model.id:
                m.skip(other, f"the same checkpoint as {describe(model)}")

    def model_file(self, loader: ComfyNode, node_id: str) -> str:
        m = self.mapper
        return m.model_file(node_id, "checkpoints", m.text(loader, "ckpt_name"), describe(loader))

    def lora(self, node: ComfyNode, expert: str | None = None) -> Port:
        m = self.mapper
        clip = m.number(node, "strength_clip", 1.0) if node.id in self.clip_loras else 0.0
        return m.loader(
            f"c{node.id}",
            "input/lora",
            m.text(node, "lora_name"),
            describe(node),
            param="name",
            params={"strength": m.number(node, "strength_model", 1.0), "strength_clip": clip},
        )
