"""`inline-core kit --family ltx2`: the tiny stacks `kit.py` builds, in the layouts asked."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from inline_core.diffusion.kit import report
from inline_core.families.ltx2.kit import SIZES, write_kit
from inline_core.families.ltx2.kit_gemma import write_gemma_kit
from inline_core.families.ltx2.kit_ltx23 import write_ltx23_kit
from inline_core.families.ltx2.kit_ltx25 import write_ltx25_kit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inline-core kit --family ltx2")
    parser.add_argument("--out", type=Path, required=True, help="the models folder to write into")
    parser.add_argument("--size", choices=SIZES, default="tiny")
    parser.add_argument(
        "--layout",
        choices=("diffusers", "comfy"),
        default="diffusers",
        help="comfy: the tiny stack as ComfyUI's files too (the all-in-one checkpoint, the "
        "Gemma 3 file with its tokenizer inside) beside its diffusers folder",
    )
    parser.add_argument(
        "--version",
        choices=("2.0", "2.3", "2.5"),
        default="2.0",
        help="2.3: the tiny LTX-2.3 stack (timestep-modulated cross-attention); 2.5: the tiny "
        "LTX-2.5 stack (Gemma 4, the diffusion video decoder); both diffusers layout, tiny size",
    )
    args = parser.parse_args(argv)
    if args.version in ("2.3", "2.5"):
        if args.layout != "diffusers" or args.size != "tiny":
            parser.error(f"--version {args.version} writes the tiny diffusers folder alone")
        writer = write_ltx23_kit if args.version == "2.3" else write_ltx25_kit
        print(report(args.out, [writer(args.out).diffusers_dir]))
        return 0
    if args.layout == "comfy":
        comfy = write_gemma_kit(args.out)
        print(report(args.out, [comfy.folder, comfy.checkpoint, comfy.gemma, comfy.upsampler]))
        return 0
    kit = write_kit(args.out, args.size)
    print(report(args.out, [kit.diffusers_dir]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
