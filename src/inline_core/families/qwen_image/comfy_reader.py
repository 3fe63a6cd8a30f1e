"""What of Qwen-Image's ComfyUI templates the recipe's data does not reach (`comfy.py`'s
reader): the node's own sampler and scheduler, image scalers on an image's way, the reference
method node of Edit 2511's conditioning, an edit's VAEEncode latent, CFGNorm, and the format
SaveImageAdvanced asks for. What renders otherwise than in ComfyUI is listed as changing the
picture; nothing is swapped silently."""

from __future__ import annotations

from typing import Any, ClassVar

from inline_core.families.qwen_image.comfy import CFG_NORM, IMAGE_SCALERS, REFERENCE_METHOD
from inline_core.graph.sampler_names import SCHEDULES
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import LORA_LOADERS, Collapse, Sampling
from inline_core.importer.samplers import exact_name
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode, Link

EDIT_LATENT = "VAEEncode"
FIRST_EDIT = "TextEncodeQwenImageEdit"  # the first Edit's template: not the one rendered here
TAKE_FORMAT = "png"
# ComfyUI's Edit 2511 reference method; the model reads its own from its file's marker.
TIMESTEP_ZERO = "index_timestep_zero"


class QwenImageCollapse(Collapse):
    SAMPLERS: ClassVar[tuple[str, ...]] = ("KSampler",)

    def source(self, node: ComfyNode, name: str, *, optional: bool = False) -> ComfyNode | None:
        """As the base reads it, an image scaler on the way read through: the model scales its
        references itself (about a megapixel for the VAE, 384x384's area for the vision tower,
        each keeping its aspect ratio), so the scaler's own size is said to change the picture."""
        found = super().source(node, name, optional=optional)
        while found is not None and found.class_type in IMAGE_SCALERS:
            self.mapper.substituted(
                found,
                "not applied: the edit model scales each image itself (to about a megapixel, "
                "keeping its aspect ratio)",
            )
            found = super().source(found, "image", optional=optional)
        return found

    def through(self, node: ComfyNode, name: str) -> ComfyNode:
        """A prompt's node, through Edit 2511's reference method node (its `conditioning`)."""
        while node.class_type == REFERENCE_METHOD:
            method = self.mapper.text(node, "reference_latents_method", TIMESTEP_ZERO)
            if method != TIMESTEP_ZERO:
                raise UnsupportedNode(
                    f"{describe(node)}: the reference method {method!r} is not offered; "
                    f"{self.descriptor.type} conditions on its references as the model's file "
                    f"says ({TIMESTEP_ZERO!r} for Edit 2511, offset for the others)"
                )
            node = self.required(node, "conditioning")
        node = super().through(node, name)
        if node.class_type == FIRST_EDIT:
            raise UnsupportedNode(
                f"{describe(node)}: the first Qwen-Image-Edit's prompt template is not offered; "
                f"{self.descriptor.type} edits as Edit 2509/2511 do (TextEncodeQwenImageEditPlus)"
            )
        return node

    def sink(self, sink: ComfyNode, params: dict[str, Any]) -> ComfyNode:
        frames = super().sink(sink, params)
        wanted = self.mapper.text(sink, "format", TAKE_FORMAT)
        if wanted != TAKE_FORMAT:
            self.mapper.substituted(sink, f"format {wanted!r} is not offered; the take is a PNG")
        return frames

    def sampling(self, sampler: ComfyNode) -> Sampling:
        """The KSampler's seed, steps, cfg, and its sampler and scheduler as the node's own
        (a name the node does not offer is refused, naming the closest)."""
        found = super().sampling(sampler)
        m, where = self.mapper, describe(sampler)
        found.extra["sampler"] = exact_name(
            "sampler", m.text(sampler, "sampler_name", "euler"), self.recipe.samplers, where
        )
        found.extra["schedule"] = exact_name(
            "scheduler", m.text(sampler, "scheduler", "simple"), SCHEDULES, where
        )
        return found

    def sampling_notes(self, sampler: ComfyNode) -> None:
        """A denoise below 1, and how its guidance is normalised, said (its sampler and scheduler
        are the node's own)."""
        m = self.mapper
        denoise = m.number(sampler, "denoise", 1.0)
        if denoise < 1.0:
            m.substituted(sampler, f"denoise {denoise:g} is not offered; the whole schedule runs")
        if m.number(sampler, "cfg", 1.0) <= 1.0:
            return
        norms = self._cfg_norms(sampler)
        if not norms:
            m.substituted(
                sampler,
                "guided as diffusers' true CFG does, rescaled to the prompt's prediction's norm "
                "(ComfyUI's CFGNorm), which this chain does not do",
            )
        for node in norms:
            strength = m.number(node, "strength", 1.0)
            if strength != 1.0:
                m.substituted(
                    node, f"strength {strength:g} is not offered; the norm is rescaled fully (1)"
                )

    def _cfg_norms(self, sampler: ComfyNode) -> list[ComfyNode]:
        """The CFGNorm nodes on the sampler's model way."""
        found: list[ComfyNode] = []
        node: ComfyNode | None = self._model_input(sampler)
        model_nodes = self.recipe.model_nodes
        while node is not None and (
            node.class_type in model_nodes or node.class_type in LORA_LOADERS
        ):
            if node.class_type == CFG_NORM:
                found.append(node)
            node = self._model_input(node)
        return found

    def _model_input(self, node: ComfyNode) -> ComfyNode | None:
        raw = node.inputs.get("model")
        return self.nodes.get(raw.node) if isinstance(raw, Link) else None

    def latent_inputs(self, latent: ComfyNode, start: ComfyNode | None) -> None:
        """An edit's VAEEncode latent: its image must be the edit's first image (the output is
        sized from the images by the node, as the edit pipeline sizes it)."""
        if latent.class_type != EDIT_LATENT:
            return
        pixels = self.required(latent, "pixels")
        first = self.images.get(self.recipe.names.image)
        if first is None or first[0] != pixels.id:
            raise UnsupportedNode(
                f"{describe(latent)}: its pixels are not the edit's first image; "
                f"{self.descriptor.type} edits the images its prompt reads, sized by them"
            )
