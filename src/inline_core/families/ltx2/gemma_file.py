"""ComfyUI's single-file Gemma 3 (`text_encoders/gemma_3_12B_it.safetensors`, its `_fp8_scaled`
and `_fp4_mixed` files) as LTX-2's text encoder: one format, torch-free at import.

The file is read as a view under `gemma_keys.COMFY_PREFIX`, which makes its keys transformers'
`Gemma3TextModel`'s: the language model alone, whose hidden states LTX-2 reads (a folder's
`Gemma3ForConditionalGeneration` runs the same layers). Its config comes from the header's
shapes, read as every decoder LM's are (`diffusion/formats/decoder_lm.py`); what shapes do not
show is Gemma 3 12B's published config (`google/gemma-3-12b-it`): a 1024-token sliding window on
five layers in six, rope theta 10 000 on those and 1 000 000 with linear scaling by 8 on the
others, queries scaled by 256. The kit's Gemma is built with the same values, so its folder and
its file are one model.

`problem` says at submit what a file lacks (a 422 naming it). ComfyUI's `_fp4_mixed` file's
NVFP4 layers are dequantized at load by the shared loader (`diffusion/nvfp4.py`, its layout
taken from ComfyUI's code, not a real file); packed layers of another layout are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inline_core.diffusion.files import nvfp4
from inline_core.diffusion.files.header import read_view
from inline_core.diffusion.files.scales import weights_only
from inline_core.diffusion.files.shapes import (
    Shapes,
    count_blocks,
    read_shapes,
    shape_of,
    weight_shapes,
)
from inline_core.diffusion.formats.decoder_lm import decoder_lm_config
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.families.ltx2 import gemma_keys

VIEW = gemma_keys.COMFY_PREFIX
CLASS_NAME = "Gemma3TextModel"
SLIDING_WINDOW = 1024
FULL_EVERY = 6  # every sixth layer attends to the whole prompt, the others to the window
QUERY_PRE_ATTN_SCALAR = 256
RMS_EPS = 1e-6
MAX_POSITIONS = 131_072
ACTIVATION = "gelu_pytorch_tanh"
ROPE_PARAMETERS: dict[str, dict[str, Any]] = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
}
SHOWN = 4  # missing keys named in a message


def is_gemma3(shapes: Shapes) -> bool:
    """A Gemma 3 language model (the view's keys): q/k-normed layers and an embedding."""
    return "embed_tokens.weight" in shapes and f"layers.0.{gemma_keys.PROBE}" in shapes


def layer_types(layers: int) -> list[str]:
    return [
        "full_attention" if (i + 1) % FULL_EVERY == 0 else "sliding_attention"
        for i in range(layers)
    ]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`Gemma3TextConfig` kwargs from the view's shapes: the shared decoder-LM reading, its head
    width from the q-norm, with Gemma 3's own rope by layer type, window and query scale."""
    config = decoder_lm_config(
        shapes,
        shape_of(shapes, f"layers.0.{gemma_keys.PROBE}")[0],
        rms_eps=RMS_EPS,
        max_positions=MAX_POSITIONS,
        tie_word_embeddings=True,
        rope_parameters=ROPE_PARAMETERS,
    )
    return {
        **config,
        "query_pre_attn_scalar": QUERY_PRE_ATTN_SCALAR,
        "sliding_window": SLIDING_WINDOW,
        "layer_types": layer_types(config["num_hidden_layers"]),
        "hidden_activation": ACTIVATION,
    }


def is_gemma_file(path: Path) -> bool:
    """Whether a single file holds ComfyUI's Gemma 3 language model (whole or not)."""
    shapes = read_shapes(path, VIEW)
    return shapes is not None and is_gemma3(shapes)


def carries_tokenizer(path: Path) -> bool:
    """Whether the file holds its SentencePiece model (ComfyUI's do)."""
    shapes = read_shapes(path)
    return shapes is not None and gemma_keys.TOKENIZER_KEY in shapes


def problem(path: Path) -> str | None:
    """Why this Gemma file cannot be read (None: it can): keys it lacks, or packed layers that
    are not ComfyUI's NVFP4 layout (`diffusion/files/nvfp4.py`)."""
    header = read_view(path, VIEW)
    fp4 = nvfp4.packed_weights(header)
    stray = nvfp4.stray_scales(header)
    if stray:
        return f"{VIEW}{stray[0]} is an NVFP4 scale, but its layer's weight is not packed fp4"
    for weight, layer in fp4.items():
        found = nvfp4.problem(header, weight, layer)
        if found is not None:
            return f"its fp4 layer {VIEW}{layer} is not ComfyUI's NVFP4 layout: {found}"
    packed = [k for k, v in weights_only(header).items() if v.dtype == nvfp4.PACKED]
    other = [k for k in packed if k not in fp4]
    if other:
        return (
            f"{VIEW}{other[0]} is packed uint8 without NVFP4's per-tensor scale "
            f"(weight_scale_2): a quantization this server does not read"
        )
    shapes = weight_shapes(header)
    layers = count_blocks(shapes, r"layers\.(\d+)\.")
    missing = [k for k in gemma_keys.text_model_keys(layers) if k not in shapes]
    if not missing:
        return None
    named = ", ".join(VIEW + k for k in missing[:SHOWN])
    more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    return f"it lacks {named}{more}"


FORMAT = ModelFormat(
    what="text encoder",
    title="Gemma 3 text encoder (ComfyUI's gemma_3_12B_it file)",
    library="transformers",
    class_name=CLASS_NAME,
    recognize=is_gemma3,
    infer_config=infer_config,
    config_class="Gemma3TextConfig",
)
