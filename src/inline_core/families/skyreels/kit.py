"""Tiny random-weight SkyReels-V2 diffusion-forcing models, written into a models folder.

    inline-core kit --family skyreels --out models/

The kit builds, from fixed seeds, Wan's tiny UMT5 (and its byte-level tokenizer) and Wan 2.1 VAE
(`families/wan/kit.py`), a tiny `SkyReelsV2Transformer3DModel` with the fps embedding, and the
published UniPC scheduler config (shift 8), and writes them as diffusers writes
`SkyReelsV2DiffusionForcingPipeline`: `diffusion_models/skyreels_v2_df_tiny_diffusers/`; and the
same transformer as one file in the original (SkyReels, Wan, ComfyUI) keys:
`diffusion_models/skyreels_v2_df_tiny_fp32.safetensors` (its VAE and UMT5 are Wan's kit's files).
Random weights draw noise.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.kit import kit_parser, report, save_weights, seeded
from inline_core.diffusion.libs import diffusers, quiet, transformers
from inline_core.families.skyreels import transformer as skyreels_transformer
from inline_core.families.skyreels.files import DEFAULT_SCHEDULER_CONFIG, PIPELINE
from inline_core.families.wan.kit import (
    SEEDS,
    TRANSFORMER_CONFIG,
    VAE_CONFIG,
    build_tokenizer,
    umt5_config,
)

TRANSFORMER_SEED = 41
SKYREELS_TRANSFORMER_CONFIG: dict[str, Any] = {
    **TRANSFORMER_CONFIG,
    "inject_sample_info": True,
    "num_frame_per_block": 1,
}
FOLDER = "skyreels_v2_df_tiny_diffusers"
SINGLE_FILE = "skyreels_v2_df_tiny_fp32.safetensors"


@dataclass(frozen=True)
class SkyReelsKit:
    root: Path
    diffusers_dir: Path
    diffusion_file: Path  # the transformer alone, in the original keys


def build_parts() -> dict[str, Any]:
    """The tiny stack, as diffusers' SkyReels-V2 pipelines take their parts."""
    quiet()
    tokenizer = build_tokenizer()
    seeded(SEEDS["text_encoder"])
    config = umt5_config(len(tokenizer), int(tokenizer.pad_token_id))
    text_encoder = transformers().UMT5EncoderModel(config).eval()
    seeded(TRANSFORMER_SEED)
    transformer = diffusers().SkyReelsV2Transformer3DModel(**SKYREELS_TRANSFORMER_CONFIG).eval()
    seeded(SEEDS["vae"])
    vae = diffusers().AutoencoderKLWan(**VAE_CONFIG).eval()
    scheduler = diffusers().UniPCMultistepScheduler.from_config(DEFAULT_SCHEDULER_CONFIG)
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        "transformer": transformer,
        "vae": vae,
        "scheduler": scheduler,
    }


def build_kit(out: Path) -> SkyReelsKit:
    """Write the kit into the models folder `out`; returns where it went."""
    import torch

    folder = out / "diffusion_models" / FOLDER
    parts = build_parts()
    getattr(diffusers(), PIPELINE)(**parts).save_pretrained(str(folder))
    single = out / "diffusion_models" / SINGLE_FILE
    original = skyreels_transformer.to_original(parts["transformer"].state_dict())
    save_weights(original, single, torch.float32)
    for category in ("vae", "text_encoders"):
        (out / category).mkdir(parents=True, exist_ok=True)
    return SkyReelsKit(out, folder, single)


def main(argv: Sequence[str] | None = None) -> int:
    parser = kit_parser(
        "inline-core kit --family skyreels",
        "Write a tiny random-weight SkyReels-V2 DF model (it draws noise).",
    )
    args = parser.parse_args(argv)
    kit = build_kit(cast(Path, args.out))
    print(report(kit.root, [kit.diffusers_dir, kit.diffusion_file]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
