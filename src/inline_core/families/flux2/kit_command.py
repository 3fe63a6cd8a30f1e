"""`inline-core kit --family flux-2`: the tiny klein models (`kit.py`) and the tiny dev
(`kit_dev.py`), in the layouts asked for, written into one models folder.

    inline-core kit --family flux-2 --out models/ [--layout comfy|diffusers ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from inline_core.diffusion.kit import report
from inline_core.families.flux2.kit import LAYOUTS, build_kit
from inline_core.families.flux2.kit_dev import build_dev_kit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core kit --family flux-2",
        description=(
            "Write tiny random-weight FLUX.2 klein and dev models (they draw noise) into a folder."
        ),
    )
    parser.add_argument("--out", type=Path, default=Path("models"), help="models folder")
    parser.add_argument(
        "--layout", choices=LAYOUTS, action="append", help="write only this layout (repeatable)"
    )
    args = parser.parse_args(argv)
    out = cast(Path, args.out)
    layouts = cast(list[str] | None, args.layout) or list(LAYOUTS)
    kit = build_kit(out, layouts)
    dev = build_dev_kit(out, layouts)
    written = [
        kit.diffusion_file,
        kit.base_file,
        kit.vae_file,
        kit.text_encoder_dir,
        kit.diffusers_dir,
        *kit.loras.values(),
        *dev.written,
    ]
    print(report(out, written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
