"""The `krea/krea-2` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.contract.common_params import MODEL, SEED, TEXT_ENCODER, VAE
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.sampler_names import SAMPLERS, SCHEDULES
from inline_core.graph.schema import PortKind

NODE_TYPE = "krea/krea-2"
MAX_PROMPT_CHARS = 20_000
MODEL_DEFAULT = "empty: the model's own (Turbo: 8 steps unguided; base: 28 at 4.5)"


def _size(name: str) -> ParamSpec:
    return ParamSpec(
        name, ParamWidget.NUMBER, default=1024, minimum=64, maximum=4096, step=16, integer=True
    )


KREA2_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Krea 2",
    category="image/generate",
    icon="sparkles",
    source="core",
    output_kind="image",
    inputs=(PortSpec("prompt", PortKind.TEXT),),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        ParamSpec("negative_prompt", ParamWidget.TEXTAREA, default="", max_length=MAX_PROMPT_CHARS),
        _size("width"),
        _size("height"),
        ParamSpec(
            "steps",
            ParamWidget.NUMBER,
            default=None,
            minimum=1,
            maximum=100,
            integer=True,
            label=f"Steps ({MODEL_DEFAULT})",
        ),
        ParamSpec(
            "guidance",
            ParamWidget.NUMBER,
            default=None,
            minimum=0.0,
            maximum=20.0,
            step=0.1,
            label=f"Guidance ({MODEL_DEFAULT}; above 0 runs the negative prompt)",
        ),
        ParamSpec("sampler", ParamWidget.SELECT, "euler", options=SAMPLERS),
        ParamSpec("schedule", ParamWidget.SELECT, "simple", options=SCHEDULES),
        SEED,
        MODEL,
        VAE,
        TEXT_ENCODER,
    ),
    description=(
        "Krea 2 (base or Turbo): text to image. Guidance above 0 runs the negative prompt "
        "(Krea's count: cond + g * (cond - uncond)); Turbo runs 8 steps without it."
    ),
)

EXTRA_HINT = "install the diffusers extra: pip install 'inline-core[diffusers]'"
