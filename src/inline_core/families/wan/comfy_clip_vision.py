"""Wan 2.1 image-to-video's ComfyUI chain, read onto `alibaba/wan` (Wan's recipe reader).

ComfyUI's template: `WanImageToVideo` (width, height, length; the start image; its prompts pass
through it to the KSampler) fed by `CLIPVisionEncode` (of the start image) and
`CLIPVisionLoader`. The node takes the start image as its `image` input and conditions on it
both ways itself: its latents, and the CLIP vision encoder it finds for its model (so the
loader's file is not a param). What it does otherwise is said in the warnings: a CLIP view of
another image than the start image, or a crop other than the center crop diffusers' CLIP
processor makes. Wan 2.2 A14B's image-to-video uses the same node without CLIP vision.
"""

from __future__ import annotations

from inline_core.importer.own_node import Collapse
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode

LATENT = "WanImageToVideo"
CHOSEN_BY_NODE = "the node finds the CLIP vision encoder for its model itself"


def read_clip_vision(collapse: Collapse, node: ComfyNode, start: ComfyNode | None) -> None:
    """`WanImageToVideo`'s CLIP vision input, read (the node makes its own view of its image)."""
    m = collapse.mapper
    encode = collapse.source(node, "clip_vision_output", optional=True)
    if encode is None:
        return
    collapse.expect(encode, "CLIPVisionEncode")
    crop = m.text(encode, "crop", "center")
    if crop != "center":
        m.warn(
            f"{describe(encode)}: crop {crop!r} is not offered; the node's CLIP vision view is "
            "center-cropped, as diffusers' CLIP image processor makes it"
        )
    image = collapse.source(encode, "image", optional=True)
    if image is not None and (start is None or image.id != start.id):
        m.warn(
            f"{describe(encode)}: encodes another image than the start image; the node's CLIP "
            "vision view is of its first frame"
        )
        m.skip(image, "another image than the start image: not offered")
    loader = collapse.source(encode, "clip_vision", optional=True)
    if loader is not None:
        m.skip(loader, CHOSEN_BY_NODE)
