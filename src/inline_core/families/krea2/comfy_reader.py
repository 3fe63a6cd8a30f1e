"""What of Krea 2's ComfyUI templates the recipe's data does not reach (`comfy.py`'s reader):
the node's own sampler and schedule, cfg in Krea's count, a prompt shown on its way
(PreviewAny passes it on), and a prompt a model writes as the workflow runs (the template's
TextGenerate enhancer), refused naming it: the node renders the prompt it is given."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from inline_core.families.krea2.variants import TURBO_NAME
from inline_core.importer.custom_collapse import ADVANCED, CustomCollapse
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Sampling
from inline_core.importer.values import describe
from inline_core.importer.widgets import CONSTANT_TYPES
from inline_core.importer.workflow import ComfyNode, Link

SHOWN = "PreviewAny"  # shows a value and passes it on


class Krea2Collapse(CustomCollapse):
    SAMPLERS: ClassVar[tuple[str, ...]] = ("KSampler", ADVANCED)

    def sampling(self, sampler: ComfyNode) -> Sampling:
        """The chain's seed and steps; its cfg in Krea's count (cfg - 1); its sampler and
        scheduler the node's own."""
        found = super().sampling(sampler)
        if found.guidance < 1.0:
            raise UnsupportedNode(
                f"{describe(sampler)}: cfg {found.guidance:g} is not offered; "
                f"{self.descriptor.type} guides from cfg 1 (unguided) up"
            )
        return self.node_names(sampler, replace(found, guidance=found.guidance - 1.0))

    def sampling_notes(self, sampler: ComfyNode) -> None:
        """A denoise below 1, and a base model's shift, said."""
        self.denoise_note(sampler)
        _values, _adapters, loader = self.model_way(sampler)
        if TURBO_NAME.search(self.mapper.text(loader, "unet_name")) is None:
            # ComfyUI shifts every Krea 2 by mu 1.15; Krea's scheduler shifts the base model
            # by the image's size (1.15 from 6400 tokens up), Turbo by 1.15.
            self.mapper.substituted(
                sampler,
                "the base model's schedule is shifted for the image's size (Krea's scheduler), "
                "not by ComfyUI's fixed 1.15",
            )

    def negative(self, sampler: ComfyNode, params: dict[str, Any]) -> None:
        super().negative(sampler, params)
        self.zeroed_negative_note(sampler)

    def prompt(self, sampler: ComfyNode, name: str) -> str:
        """The prompt's text, read through PreviewAny; one that only running the workflow makes
        (a model writing it) is refused naming the node that makes it."""
        node = self.through(self.required(sampler, name), name)
        encoder = self.recipe.encoders.get(node.class_type)
        if encoder is not None:
            self._text_source(node, encoder.text)
        return super().prompt(sampler, name)

    def _text_source(self, encoder: ComfyNode, widget: str) -> None:
        raw = encoder.inputs.get(widget)
        while isinstance(raw, Link):
            source = self.nodes.get(raw.node)
            if source is None or source.class_type in CONSTANT_TYPES:
                return
            if source.class_type != SHOWN:
                raise UnsupportedNode(
                    f"{describe(encoder)}: its {widget} comes from {describe(source)}, which "
                    f"only running the workflow decides; {self.descriptor.type} renders the "
                    "prompt it is given (write it, or switch the node off in the workflow)"
                )
            self.read.add(source.id)
            raw = source.inputs.get("source")
            # Read as the link PreviewAny passes on (it only shows the value).
            encoder.inputs[widget] = raw
