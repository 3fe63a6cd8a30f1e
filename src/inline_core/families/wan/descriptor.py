"""The `alibaba/wan` node: what a client draws and the validator checks (torch-free)."""

from __future__ import annotations

from inline_core.families.common_params import MODEL, SEED
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

NODE_TYPE = "alibaba/wan"
MAX_PROMPT_CHARS = 20_000


def _size(name: str, default: int) -> ParamSpec:
    return ParamSpec(
        name, ParamWidget.NUMBER, default, minimum=16, maximum=2048, step=16, integer=True
    )


WAN_DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Wan 2.1",
    category="video/generate",
    icon="film",
    source="core",
    output_kind="video",
    inputs=(
        PortSpec("prompt", PortKind.TEXT),
        PortSpec("image", PortKind.IMAGE, optional=True, label="Image (image-to-video models)"),
    ),
    outputs=(PortSpec("video", PortKind.VIDEO),),
    params=(
        ParamSpec("negative_prompt", ParamWidget.TEXTAREA, default="", max_length=MAX_PROMPT_CHARS),
        _size("width", 832),
        _size("height", 480),
        # 4k+1, checked at submit (`WanFamily.check_wired` names the param).
        ParamSpec("frames", ParamWidget.NUMBER, default=81, minimum=1, maximum=1001, integer=True),
        ParamSpec("fps", ParamWidget.NUMBER, default=16, minimum=1, maximum=120, integer=True),
        ParamSpec("steps", ParamWidget.NUMBER, default=50, minimum=1, maximum=200, integer=True),
        ParamSpec("guidance", ParamWidget.NUMBER, default=5.0, minimum=1.0, maximum=20.0, step=0.1),
        ParamSpec(
            "shift",
            ParamWidget.NUMBER,
            default=None,
            minimum=0.0,
            maximum=20.0,
            step=0.1,
            label="Flow shift (empty: the model's own)",
        ),
        SEED,
        MODEL,
        ParamSpec("format", ParamWidget.SELECT, default="mp4", options=("mp4", "png")),
    ),
    description=(
        "Text to video with Wan 2.1 (1.3B or 14B). frames is 4k+1 (81 at 16 fps is five seconds). "
        "Guidance above 1 turns on classifier-free guidance with the negative prompt. format mp4 "
        "is H.264 (yuv420p); png is a lossless animated PNG, for exact comparisons."
    ),
)

EXTRA_HINT = (
    "install the zimage extra (torch, diffusers, transformers) for Wan: "
    "pip install 'inline-core[zimage]'"
)
