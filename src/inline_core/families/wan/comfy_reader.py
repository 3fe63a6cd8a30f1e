"""What of Wan's ComfyUI templates the recipe's data does not reach (`comfy.py`'s reader): the
sampler's sampler_name and scheduler, the node's `sampler` and `schedule` one to one (a name it
does not run refused, naming the closest); Wan 2.2 A14B's two KSamplerAdvanced stages, one render
of its expert pair switched at a step; a SamplerCustomAdvanced chain, read as the KSampler it
amounts to (`importer/custom_collapse.py`); and Wan 2.1's CLIP-vision image-to-video chain."""

from __future__ import annotations

from typing import Any, ClassVar

from inline_core.families.wan import comfy_clip_vision, comfy_stages
from inline_core.families.wan.comfy import I2V
from inline_core.importer.custom_collapse import ADVANCED as CUSTOM
from inline_core.importer.custom_collapse import CustomCollapse
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Sampling
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode


class WanCollapse(CustomCollapse):
    SAMPLERS: ClassVar[tuple[str, ...]] = ("KSampler", comfy_stages.ADVANCED, CUSTOM)

    def sampling(self, sampler: ComfyNode) -> Sampling:
        if sampler.class_type != comfy_stages.ADVANCED:
            found = super().sampling(sampler)
        else:
            found = comfy_stages.read(self, sampler)
            comfy_stages.history_note(self, found)
        return self.node_names(sampler, found)

    def sampling_notes(self, sampler: ComfyNode) -> None:
        self.denoise_note(sampler)  # the names are the node's own (`sampling`)

    def model(self, sampling: Sampling, node_id: str) -> dict[str, Any]:
        """One model's way, or a pair's: the first stage's LoRAs adapt the high-noise expert,
        the low-noise stage's the other (its shift listed where it differs)."""
        if sampling.last is None:
            return super().model(sampling, node_id)
        m = self.mapper
        values, adapters, node = self.model_way(sampling.first)
        self.loras = [self.lora(n, "high") for n in adapters]
        values_2, adapters_2, low = self.model_way(sampling.last)
        if low.id == node.id or m.text(low, "unet_name") == m.text(node, "unet_name"):
            raise UnsupportedNode(
                f"{describe(sampling.last)}: both stages sample {describe(node)}'s model; two "
                "stages import only as Wan 2.2 A14B's two experts, each on its own "
                "UNETLoader (the high-noise file first)"
            )
        comfy_stages.shifts_note(self, sampling.last, values.get("shift"), values_2.get("shift"))
        m.skip(low, "the node finds the high-noise model's low-noise sibling beside it itself")
        self.loras += [self.lora(n, "low") for n in adapters_2]
        return {**values, self.recipe.names.model: self.model_file(node, node_id)}

    def latent_inputs(self, latent: ComfyNode, start: ComfyNode | None) -> None:
        if latent.class_type == I2V:
            comfy_clip_vision.read_clip_vision(self, latent, start)
