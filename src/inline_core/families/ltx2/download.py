"""LTX-2's download targets (`downloads/` does the downloading).

    inline-core download --family ltx2 [--models DIR] [--dry-run] [TARGET ...]

Lightricks' diffusers repo of LTX-2 lands whole as a folder in `models/diffusion_models/` (its
model index and the folders of its parts: transformer, video and audio VAEs, vocoder, text
connectors, the Gemma 3 text encoder, its tokenizer and scheduler), which is what this family
reads today.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target

REPO = "Lightricks/LTX-2"
PARTS = ("audio_vae/*", "vocoder/*", "connectors/*")
STACK = (
    "diffusion_model",
    "vae",
    "audio_vae",
    "vocoder",
    "connectors",
    "text_encoder",
    "tokenizer",
)

DOWNLOADS = Downloads(
    title="LTX-2",
    targets={
        "diffusers": Target(
            REPO,
            "diffusion_models",
            DIFFUSERS_PIPELINE + PARTS,
            folder="LTX-2",
            roles=STACK,
            layout="diffusers",
        ),
    },
    presets={"ltx-2": ("diffusers",)},
    default="ltx-2",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family ltx2`

if __name__ == "__main__":
    sys.exit(main())
