"""What of FLUX.2's ComfyUI templates the recipe's data does not reach (`comfy.py`'s reader):
Flux2Scheduler's schedule, the node's own sampler, the edit's ReferenceLatent chain onto the
node's reference images, dev's FluxGuidance on the prompt's way (the node's embedded guidance),
the image scalers and GetImageSize on an image's way, and a negative prompt that is not the
empty one. What renders otherwise than in ComfyUI is listed as changing the picture; a node on
the chain that cannot render is refused naming it."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, ClassVar

from inline_core.families.flux2.comfy import GUIDANCE, LATENT, REFERENCE, SCHEDULER
from inline_core.families.flux2.descriptor import REFERENCES
from inline_core.families.flux2.transformer import config_of
from inline_core.families.flux2.variants import EMBEDDED_DEFAULT, Flux2Variant, variant_of
from inline_core.importer.custom_collapse import BASIC_SCHEDULER, CustomCollapse
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.images import load_image
from inline_core.importer.model_files import match_model_file
from inline_core.importer.own_node import Sampling
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode, Link
from inline_core.models.source import Source

# A file not here yet: its name says the variant, as ComfyUI's and BFL's files are named.
DEV_NAME = re.compile(r"flux[-_.]?2[-_.]?dev", re.IGNORECASE)
KLEIN_NAME = re.compile(r"klein", re.IGNORECASE)
# Classes that scale an image on its way to a VAEEncode: the model sizes its references itself.
IMAGE_SCALERS = ("ImageScaleToTotalPixels", "FluxKontextImageScale", "ImageScale")
SIZE_NODE = "GetImageSize"
TRANSFORMER = "transformer"  # a diffusers folder's subfolder
SIZES = ("width", "height")


class Flux2Collapse(CustomCollapse):
    SCHEDULERS: ClassVar[tuple[str, ...]] = (SCHEDULER, BASIC_SCHEDULER)

    def schedule(self, sigmas: ComfyNode, sampler: ComfyNode) -> dict[str, Any]:
        """Flux2Scheduler is the model's own schedule (diffusers' empirical shift for the
        render's size and steps), so the node's `simple`; sized for another size than the
        latent's, it is said to change the picture."""
        if sigmas.class_type != SCHEDULER:
            return super().schedule(sigmas, sampler)
        latent = self.nodes.get(_link_node(sampler.inputs.get("latent_image")) or "")
        if latent is not None and latent.class_type == LATENT:
            differs = [s for s in SIZES if not self._same(sigmas, latent, s)]
            if differs:
                self.mapper.substituted(
                    sigmas,
                    f"its {' and '.join(differs)} differ from {describe(latent)}'s: the schedule "
                    "is shifted for the size rendered",
                )
        return {"steps": sigmas.inputs.get("steps"), "scheduler": "simple", "denoise": 1.0}

    def _same(self, a: ComfyNode, b: ComfyNode, name: str) -> bool:
        """Whether two nodes' widget `name` is one value: one link, or equal literals."""
        first, second = a.inputs.get(name), b.inputs.get(name)
        if isinstance(first, Link) or isinstance(second, Link):
            return first == second
        return self.mapper.whole(a, name, 1024) == self.mapper.whole(b, name, 1024)

    def sampling(self, sampler: ComfyNode) -> Sampling:
        """As the chain reads; its sampler and scheduler the node's own. On FLUX.2 dev (its
        model file's name, or a FluxGuidance on the positive prompt's way) the guidance is the
        model's embedded input: FluxGuidance's, or ComfyUI's default without one; no
        classifier-free guidance runs beside it. On klein (no guidance embedder) a FluxGuidance
        does nothing, in ComfyUI as here."""
        found = self.node_names(sampler, super().sampling(sampler))
        guidance = self._flux_guidance(found.first)
        loader = self.model_way(found.first)[2]
        if not self._reads_as_dev(loader, guidance):
            if guidance is not None:
                self.mapper.warn(
                    f"{describe(guidance)}: FLUX.2 klein has no guidance embedder, so it has no "
                    "effect (as in ComfyUI)"
                )
            return found
        if found.guidance != 1.0:
            raise UnsupportedNode(
                f"{describe(guidance or sampler)}: FLUX.2 dev embeds its guidance, and "
                f"{describe(sampler)}'s guider runs classifier-free guidance at cfg "
                f"{found.guidance:g} beside it; {self.descriptor.type} runs dev's embedded "
                "guidance alone (use BasicGuider or cfg 1, and FluxGuidance for the guidance)"
            )
        if guidance is None:
            return replace(found, guidance=EMBEDDED_DEFAULT)
        return replace(found, guidance=self.mapper.number(guidance, "guidance", EMBEDDED_DEFAULT))

    def _reads_as_dev(self, loader: ComfyNode, guidance: ComfyNode | None) -> bool:
        """Whether the loader's model is FLUX.2 dev: the file it maps onto here, told by its
        guidance embedder; a file not here by its name, or by a FluxGuidance on the way."""
        kind = self._variant_here(loader)
        if kind is not None:
            return not kind.klein
        name = self.mapper.text(loader, "unet_name")
        if KLEIN_NAME.search(name):
            return False
        if DEV_NAME.search(name) or guidance is not None:
            return True
        self.mapper.warn(
            f"{describe(loader)}: {name!r} is not here and its name says no FLUX.2 variant: read "
            "as klein (no embedded guidance); a dev file renders at the sampler's cfg as its "
            "guidance, where ComfyUI embeds 3.5"
        )
        return False

    def _variant_here(self, loader: ComfyNode) -> Flux2Variant | None:
        """The variant of the file the loader's name maps onto here (None: not here, or
        unreadable)."""
        widget, category = self.MODEL_LOADERS[loader.class_type]
        wanted = self.mapper.text(loader, widget)
        chosen = (
            self.mapper.renamed.get(wanted)
            or match_model_file(self.mapper.catalog, category, wanted).name
        )
        if chosen not in self.mapper.catalog.options(category):
            return None
        path = self.mapper.catalog.path(category, chosen)
        nested = path.is_dir() and (path / TRANSFORMER).is_dir()
        source = Source(path, TRANSFORMER) if nested else Source(path)
        return variant_of(config_of(source), source)

    def _flux_guidance(self, sampler: ComfyNode) -> ComfyNode | None:
        """The FluxGuidance on the positive prompt's way (nearest the sampler), if any."""
        raw = sampler.inputs.get("positive")
        node = self.nodes.get(raw.node) if isinstance(raw, Link) else None
        while node is not None and node.class_type in (REFERENCE, GUIDANCE):
            if node.class_type == GUIDANCE:
                return node
            raw = node.inputs.get("conditioning")
            node = self.nodes.get(raw.node) if isinstance(raw, Link) else None
        return None

    def sampling_notes(self, sampler: ComfyNode) -> None:
        self.denoise_note(sampler)

    def through(self, node: ComfyNode, name: str) -> ComfyNode:
        """A prompt's node through its ReferenceLatent chain: the positive prompt's references
        are the node's images, in the order applied; the negative's must be the same images
        (the model reads one set for both), or none."""
        found: list[ComfyNode] = []  # the LoadImage nodes, last applied first
        while node.class_type in (REFERENCE, GUIDANCE):  # FluxGuidance: read by `sampling`
            if node.class_type == REFERENCE:
                found.append(self._reference(node))
            node = self.required(node, "conditioning")
        node = super().through(node, name)
        ordered = found[::-1]
        if name == "positive":
            if len(ordered) > len(REFERENCES):
                raise UnsupportedNode(
                    f"{describe(node)}: its prompt is conditioned on {len(ordered)} reference "
                    f"images; {self.descriptor.type} takes at most {len(REFERENCES)}"
                )
            for port, image in zip(REFERENCES, ordered, strict=False):
                value = load_image(self.mapper, image, 0)
                if value is not None and value.port is not None:
                    self.images[port] = (image.id, value.port)
            return node
        positive = [image_id for image_id, _port in self.images.values()]
        if ordered and [n.id for n in ordered] != positive:
            raise UnsupportedNode(
                f"{describe(node)}: the negative prompt's reference images are not the positive "
                f"prompt's; {self.descriptor.type} conditions both on one set of images"
            )
        return node

    def negative(self, sampler: ComfyNode, params: dict[str, Any]) -> None:
        super().negative(sampler, params)
        self.zeroed_negative_note(sampler, (REFERENCE,))

    def _reference(self, node: ComfyNode) -> ComfyNode:
        """A ReferenceLatent's image: the LoadImage its VAEEncode encodes (through scalers)."""
        encoded = self.required(node, "latent")
        self.expect(encoded, "VAEEncode")
        vae = self.source(encoded, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        image = self.required(encoded, "pixels")
        while image.class_type in IMAGE_SCALERS:
            self.mapper.substituted(
                image,
                "not applied: the model scales a reference image above a megapixel down to "
                "one itself (keeping its aspect ratio, cropped to multiples of 16)",
            )
            image = self.required(image, "image")
        self.expect(image, "LoadImage")
        return image

    def latent(self, sampler: ComfyNode, params: dict[str, Any]) -> Any:
        """The latent's size; one measured from an image (GetImageSize) is not known before the
        image is, so the node's size renders, said to change the picture."""
        node = self.nodes.get(_link_node(sampler.inputs.get("latent_image")) or "")
        if node is not None and node.class_type == LATENT:
            measured = [s for s in SIZES if self._measured(node.inputs.get(s))]
            if measured:
                self.mapper.substituted(
                    node,
                    f"its {' and '.join(measured)} come from an image's size, which is not known "
                    "at import; the node renders at its width and height (set them)",
                )
        return super().latent(sampler, params)

    def _measured(self, value: object) -> bool:
        source = self.nodes.get(value.node) if isinstance(value, Link) else None
        if source is None or source.class_type != SIZE_NODE:
            return False
        self.read.add(source.id)
        return True


def _link_node(value: object) -> str | None:
    return value.node if isinstance(value, Link) else None
