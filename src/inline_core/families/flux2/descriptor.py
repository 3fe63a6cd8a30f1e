"""The `bfl/flux-2` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.contract.common_params import LORAS
from inline_core.families.nodes.sampling import sampling_params
from inline_core.graph.descriptor import NodeDescriptor, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "bfl/flux-2"
REFERENCES = ("image", "image2", "image3")  # reference images, in the model's order
MODEL_DEFAULT = (
    "empty: the model's own (klein distilled: 4 steps; klein base and dev: 50 at guidance 4)"
)


FLUX2_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="FLUX.2",
    category="image/generate",
    icon="sparkles",
    source="core",
    output_kind="image",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        *(
            PortSpec(name, PortKind.IMAGE, optional=True, label=f"Reference image {i + 1}")
            for i, name in enumerate(REFERENCES)
        ),
        LORAS,
    ),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=sampling_params(
        MODEL_DEFAULT, "klein: above 1 on base models only; dev: the model's embedded guidance"
    ),
    description=(
        "FLUX.2 klein (4B or 9B, distilled or base) or FLUX.2 dev: text to image, or an edit of "
        "up to three reference images wired in (each at most 1024x1024 pixels, cropped to "
        "multiples of 16). klein's distilled models run few steps without guidance; on a klein "
        "base model guidance above 1 runs classifier-free guidance against an empty prompt; dev "
        "is guidance-distilled: guidance is an input of the model, one forward a step, no "
        "negative prompt. LoRAs wired in (input/lora) apply to this render alone."
    ),
)

EXTRA_HINT = "install the diffusers extra: pip install 'inline-core[diffusers]'"
