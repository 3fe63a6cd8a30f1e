"""Tiny random-weight LTX-2 stacks, written into a models folder.

    inline-core kit --family ltx2 --out models/ [--size tiny|mid] [--layout diffusers|comfy]
    (`kit_command.py`)

The kit builds, from fixed seeds, an `LTX2VideoTransformer3DModel` (video and audio streams), the
video VAE (`AutoencoderKLLTX2Video`, 2x down in space and time at this size), the audio VAE
(`AutoencoderKLLTX2Audio`, mel spectrograms), the vocoder (`LTX2Vocoder`), the text connectors
(`LTX2TextConnectors`) and a Gemma 3 text encoder (`Gemma3ForConditionalGeneration`, a tiny text
tower and a tiny vision tower) with a byte-level tokenizer, and writes the diffusers layout:
`diffusion_models/ltx-2_tiny_diffusers/` (`LTX2Pipeline.save_pretrained`, LTX-2.0's legacy
connector; with its `latent_upsampler/`, the two-stage path's). The tiny sizes are those of
diffusers' own LTX-2 tests; `--size mid` widens and
deepens the transformer alone (8 layers, video 8 heads x 64, sound 4 x 32: about 40M parameters,
where most of a render's time goes) for figures nearer a real model's, written to
`diffusion_models/ltx-2_mid_diffusers/`. `--layout comfy` writes the tiny stack as ComfyUI's
files too (`kit_gemma.py`). Random weights draw noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inline_core.diffusion.kit import byte_tokenizer, seeded
from inline_core.diffusion.libs import diffusers, module, quiet, transformers
from inline_core.families.ltx2 import gemma_file

FOLDER = "ltx-2_tiny_diffusers"
SIZES = ("tiny", "mid")
MAX_PROMPT_TOKENS = 16  # the tiny stack's padded prompt (LTX-2's own: 1024)
TEXT_WIDTH = 32  # the connectors' width too: 4 heads x 8
TEXT_LAYERS = 2
LATENT_CHANNELS = 128  # LTX-2's own: the step previews' latent format (`ltxv`) reads 128
TRANSFORMER_CONFIG: dict[str, Any] = {
    "in_channels": LATENT_CHANNELS,
    "out_channels": LATENT_CHANNELS,
    "patch_size": 1,
    "patch_size_t": 1,
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "audio_in_channels": 4,
    "audio_out_channels": 4,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "audio_cross_attention_dim": 8,
    "num_layers": 2,
    "qk_norm": "rms_norm_across_heads",
    "caption_channels": TEXT_WIDTH,
    "rope_double_precision": False,
    "rope_type": "split",
}
# The mid transformer: cross-attention as wide as each stream (LTX-2's own layout).
MID_TRANSFORMER: dict[str, Any] = {
    "num_layers": 8,
    "num_attention_heads": 8,
    "attention_head_dim": 64,
    "cross_attention_dim": 512,
    "audio_num_attention_heads": 4,
    "audio_attention_head_dim": 32,
    "audio_cross_attention_dim": 128,
}
CONNECTORS_CONFIG: dict[str, Any] = {
    "caption_channels": TEXT_WIDTH,
    "text_proj_in_factor": TEXT_LAYERS + 1,
    "video_connector_num_attention_heads": 4,
    "video_connector_attention_head_dim": 8,
    "video_connector_num_layers": 1,
    "video_connector_num_learnable_registers": None,
    "audio_connector_num_attention_heads": 4,
    "audio_connector_attention_head_dim": 8,
    "audio_connector_num_layers": 1,
    "audio_connector_num_learnable_registers": None,
    "connector_rope_base_seq_len": 32,
    "rope_theta": 10000.0,
    "rope_double_precision": False,
    "causal_temporal_positioning": False,
    "rope_type": "split",
}
VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": LATENT_CHANNELS,
    "block_out_channels": (8,),
    "decoder_block_out_channels": (8,),
    "layers_per_block": (1,),
    "decoder_layers_per_block": (1, 1),
    "spatio_temporal_scaling": (True,),
    "decoder_spatio_temporal_scaling": (True,),
    "decoder_inject_noise": (False, False),
    "downsample_type": ("spatial",),
    "upsample_residual": (False,),
    "upsample_factor": (1,),
    "timestep_conditioning": False,
    "patch_size": 1,
    "patch_size_t": 1,
    "encoder_causal": True,
    "decoder_causal": False,
}
AUDIO_VAE_CONFIG: dict[str, Any] = {
    "base_channels": 4,
    "output_channels": 2,
    "ch_mult": (1,),
    "num_res_blocks": 1,
    "attn_resolutions": None,
    "in_channels": 2,
    "resolution": 32,
    "latent_channels": 2,
    "norm_type": "pixel",
    "causality_axis": "height",
    "dropout": 0.0,
    "mid_block_add_attention": False,
    "sample_rate": 16000,
    "mel_hop_length": 160,
    "is_causal": True,
    "mel_bins": 8,
}
VOCODER_CONFIG: dict[str, Any] = {
    "in_channels": 2 * 8,  # the audio VAE's channels x mel bins
    "hidden_channels": 32,
    "out_channels": 2,
    # 8 x 5 x 4 = 160 samples a mel frame, the audio VAE's hop: the sound lasts as the video.
    "upsample_kernel_sizes": [16, 10, 8],
    "upsample_factors": [8, 5, 4],
    "resnet_kernel_sizes": [3],
    "resnet_dilations": [[1, 3, 5]],
    "leaky_relu_negative_slope": 0.1,
    "output_sampling_rate": 16000,
}
# LTX-2's published scheduler: flow matching, its shift from the token count (`mu`).
SCHEDULER_CONFIG: dict[str, Any] = {
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "use_dynamic_shifting": True,
    "base_shift": 0.95,
    "max_shift": 2.05,
    "base_image_seq_len": 1024,
    "max_image_seq_len": 4096,
    "shift_terminal": 0.1,
    "time_shift_type": "exponential",
}
# The spatial latent upsampler (2x in width and height) of the two-stage path: LTX-2.0's x2
# layer is the rational resampler, 2.3's and 2.5's a plain pixel shuffle (upsampler_version.py).
UPSAMPLER_CONFIG: dict[str, Any] = {
    "in_channels": LATENT_CHANNELS,
    "mid_channels": 32,
    "num_blocks_per_stage": 1,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "rational_spatial_scale": 2.0,
}
SEEDS = {
    "text_encoder": 41,
    "transformer": 42,
    "connectors": 43,
    "vae": 44,
    "audio_vae": 45,
    "vocoder": 46,
    "latent_upsampler": 47,
}


@dataclass(frozen=True)
class LTX2Kit:
    root: Path
    diffusers_dir: Path


def build_tokenizer() -> Any:
    return byte_tokenizer(
        ["<pad>", "<eos>", "<bos>", "<unk>"],
        pad_token="<pad>",
        eos_token="<eos>",
        model_max_length=MAX_PROMPT_TOKENS,
    )


def gemma3_config(vocab_size: int) -> Any:
    lib = transformers()
    text = lib.Gemma3TextConfig(
        vocab_size=vocab_size,
        hidden_size=TEXT_WIDTH,
        intermediate_size=32,
        num_hidden_layers=TEXT_LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        # What shapes do not show is Gemma 3 12B's, as a single file is read (`gemma_file.py`).
        max_position_embeddings=gemma_file.MAX_POSITIONS,
        sliding_window=gemma_file.SLIDING_WINDOW,
        rope_parameters=gemma_file.ROPE_PARAMETERS,
        layer_types=gemma_file.layer_types(TEXT_LAYERS),
    )
    vision = lib.SiglipVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    return lib.Gemma3Config(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        mm_tokens_per_image=4,
        image_token_index=vocab_size - 1,
        boi_token_index=vocab_size - 2,
        eoi_token_index=vocab_size - 3,
    )


def folder_name(size: str) -> str:
    return FOLDER if size == "tiny" else f"ltx-2_{size}_diffusers"


def build_parts(size: str = "tiny") -> dict[str, Any]:
    """The stack of this size, as `LTX2Pipeline` takes its parts."""
    if size not in SIZES:
        raise ValueError(f"no LTX-2 kit size {size!r}: {', '.join(SIZES)}")
    quiet()
    lib = diffusers()
    ltx2 = module("diffusers.pipelines.ltx2")
    tokenizer = build_tokenizer()
    seeded(SEEDS["text_encoder"])
    text_encoder = transformers().Gemma3ForConditionalGeneration(gemma3_config(len(tokenizer) + 3))
    seeded(SEEDS["transformer"])
    widths = MID_TRANSFORMER if size == "mid" else {}
    transformer = lib.LTX2VideoTransformer3DModel(**{**TRANSFORMER_CONFIG, **widths})
    seeded(SEEDS["connectors"])
    connectors = ltx2.LTX2TextConnectors(**CONNECTORS_CONFIG)
    seeded(SEEDS["vae"])
    vae = lib.AutoencoderKLLTX2Video(**VAE_CONFIG)
    seeded(SEEDS["audio_vae"])
    audio_vae = lib.AutoencoderKLLTX2Audio(**AUDIO_VAE_CONFIG)
    seeded(SEEDS["vocoder"])
    vocoder = ltx2.LTX2Vocoder(**VOCODER_CONFIG)
    return {
        "transformer": transformer.eval(),
        "vae": vae.eval(),
        "audio_vae": audio_vae.eval(),
        "scheduler": lib.FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG),
        "text_encoder": text_encoder.eval(),
        "tokenizer": tokenizer,
        "connectors": connectors.eval(),
        "vocoder": vocoder.eval(),
    }


def write_kit(out: Path, size: str = "tiny") -> LTX2Kit:
    """Write the LTX-2 stack of this size into the models folder `out`."""
    parts = build_parts(size)
    folder = out / "diffusion_models" / folder_name(size)
    diffusers().LTX2Pipeline(**parts).save_pretrained(str(folder))
    build_upsampler().save_pretrained(str(folder / "latent_upsampler"))  # as Lightricks/LTX-2's
    return LTX2Kit(out, folder)


def build_upsampler(ltx20: bool = True) -> Any:
    """The tiny upsampler as LTX-2.0's (`ltx20`) or 2.3's and later are built."""
    seeded(SEEDS["latent_upsampler"])
    ltx2 = module("diffusers.pipelines.ltx2.latent_upsampler")
    config = {**UPSAMPLER_CONFIG, "use_rational_resampler": ltx20}
    return ltx2.LTX2LatentUpsamplerModel(**config).eval()
