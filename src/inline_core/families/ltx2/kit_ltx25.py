"""A tiny random-weight LTX-2.5 stack, offline (`ltx25.py` says what 2.5 is made of).

The tiny LTX-2 stack (`kit.py`) with LTX-2.5's parts in place of 2.0's: a tiny Gemma 4 text
encoder (`Gemma4UnifiedForConditionalGeneration`, text tower only, the kit's byte-level
tokenizer) and a tiny diffusion video decoder (`LTX2VideoDiffusionDecoderModel`: one
deterministic stage, one 2x upsample in time and space, as the tiny VAE compresses; one x0
denoising step, as 2.5 ships), written as `diffusion_models/ltx-2.5_tiny_diffusers/`:
`LTX2Pipeline.save_pretrained` and the decoder in its `diffusion_decoder/`, with the tiny
latent upsampler in `latent_upscale_models/` (where ComfyUI's LTX-2.5 templates put theirs) for
`upscale`. The name says nothing to the server: the folder's Gemma 4 does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inline_core.diffusion.kit import seeded
from inline_core.diffusion.libs import diffusers, transformers
from inline_core.families.ltx2.descriptor import UPSCALE_CATEGORY
from inline_core.families.ltx2.kit import (
    LATENT_CHANNELS,
    TEXT_LAYERS,
    TEXT_WIDTH,
    LTX2Kit,
    build_upsampler,
)
from inline_core.families.ltx2.kit import build_parts as build_ltx2_parts
from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER

FOLDER = "ltx-2.5_tiny_diffusers"
UPSAMPLER = "ltx-2.5_tiny_upsampler"  # in latent_upscale_models/
ENCODER_SEED, DECODER_SEED = 141, 148
GEMMA4_TEXT: dict[str, Any] = {
    "hidden_size": TEXT_WIDTH,
    "intermediate_size": 32,
    "num_hidden_layers": TEXT_LAYERS,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "global_head_dim": 8,  # its full-attention layers' heads (Gemma 4's own: 512)
    "sliding_window": 16,
    "max_position_embeddings": 256,
}
DECODER_CONFIG: dict[str, Any] = {
    "latent_channels": LATENT_CHANNELS,
    "patch_size": 1,
    "decoder_head_dim": 8,
    "decoder_stage_channels": (16, 8),
    "decoder_stage_depths": (1, 1),
    "decoder_stage_kernels": ((3, 3, 3),),
    "decoder_upsample_strides": ((2, 2, 2),),  # the tiny VAE's 2x in time and space
    "decoder_upsample_channel_reductions": (2,),
    "decoder_stage5_kernel": (3, 3, 3),
    "decoder_t_emb_dim": 16,
    "spatial_compression_ratio": 2,
    "temporal_compression_ratio": 2,
}


def build_decoder() -> Any:
    seeded(DECODER_SEED)
    return diffusers().LTX2VideoDiffusionDecoderModel(**DECODER_CONFIG).eval()


def build_parts() -> dict[str, Any]:
    """The tiny stack as `LTX2Pipeline` takes its parts, its text encoder Gemma 4."""
    parts = build_ltx2_parts()
    lib = transformers()
    config = lib.Gemma4UnifiedConfig(
        text_config={"vocab_size": len(parts["tokenizer"]) + 3, **GEMMA4_TEXT},
        vision_config=None,
        audio_config=None,
    )
    seeded(ENCODER_SEED)
    parts["text_encoder"] = lib.Gemma4UnifiedForConditionalGeneration(config).eval()
    return parts


def write_ltx25_kit(out: Path) -> LTX2Kit:
    """Write the tiny LTX-2.5 stack into the models folder `out`."""
    folder = out / "diffusion_models" / FOLDER
    diffusers().LTX2Pipeline(**build_parts()).save_pretrained(str(folder))
    build_decoder().save_pretrained(str(folder / DECODER_SUBFOLDER))
    build_upsampler(ltx20=False).save_pretrained(str(out / UPSCALE_CATEGORY / UPSAMPLER))
    return LTX2Kit(out, folder)
