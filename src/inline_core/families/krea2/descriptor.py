"""The `krea/krea-2` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.contract.common_params import LORAS, NEGATIVE_PROMPT
from inline_core.families.nodes.sampling import sampling_params
from inline_core.graph.descriptor import NodeDescriptor, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "krea/krea-2"
MODEL_DEFAULT = "empty: the model's own (Turbo: 8 steps unguided; base: 28 at 4.5)"


KREA2_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Krea 2",
    category="image/generate",
    icon="sparkles",
    source="core",
    output_kind="image",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        LORAS,
    ),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        NEGATIVE_PROMPT,
        *sampling_params(MODEL_DEFAULT, "above 0 runs the negative prompt"),
    ),
    description=(
        "Krea 2 (base or Turbo): text to image. Guidance above 0 runs the negative prompt "
        "(Krea's count: cond + g * (cond - uncond)); Turbo runs 8 steps without it. LoRAs wired in "
        "(input/lora) apply to this render alone."
    ),
)

EXTRA_HINT = "install the diffusers extra: pip install 'inline-core[diffusers]'"
