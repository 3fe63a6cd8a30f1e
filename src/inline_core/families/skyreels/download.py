"""SkyReels-V2's download targets (`downloads/` does the downloading).

    inline-core download --family skyreels [--models DIR] [--dry-run] [TARGET ...]

Skywork's diffusion-forcing `-Diffusers` repos land whole as folders in
`models/diffusion_models/`, as Wan's do (`families/wan/download.py`): each brings its transformer,
Wan's VAE, the UMT5 with its tokenizer, and its scheduler. The default is the smallest: DF 1.3B at
540P.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import Downloads
from inline_core.families.wan.download import diffusers_folder

DOWNLOADS = Downloads(
    title="SkyReels-V2",
    targets={
        "diffusers-df-1.3b-540p": diffusers_folder("Skywork/SkyReels-V2-DF-1.3B-540P-Diffusers"),
        "diffusers-df-14b-540p": diffusers_folder("Skywork/SkyReels-V2-DF-14B-540P-Diffusers"),
        "diffusers-df-14b-720p": diffusers_folder("Skywork/SkyReels-V2-DF-14B-720P-Diffusers"),
    },
    presets={
        "df-1.3b-540p": ("diffusers-df-1.3b-540p",),
        "df-14b-540p": ("diffusers-df-14b-540p",),
        "df-14b-720p": ("diffusers-df-14b-720p",),
    },
    default="df-1.3b-540p",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family skyreels`

if __name__ == "__main__":
    sys.exit(main())
