"""LTX-2.5's diffusion video decoder: peak memory of one decode, diffusers' flex attention against
the server's blocked neighbourhood attention (`families/ltx2/neighborhood_attention.py`).

    flock /tmp/inline-realsize.lock .venv/bin/python bench/ltx25_decoder_memory.py \
        [--sizes 32x32x5,48x48x9,64x64x9] [--sides flex,blocked]

The tiny kit's decoder (`kit_ltx25.build_decoder`: random weights, CPU float32) decodes random
latents of a WxHxF video (the kit's VAE is 2x down in time and space) with a fixed generator,
each side in a fresh process of its own (`--child`): its RSS once the decoder and latents are
built, its peak reset there (`/proc/self/clear_refs`), then the peak over the decode (VmHWM)
and the decode's seconds. The parent compares the two sides' frames (max abs difference) and
prints a table, writing bench/results/ltx25_decoder_memory.json with the load average. The flex
side's memory grows with the square of the video's cells: 64x64x9 takes over 10 GB, hence the
lock.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "ltx25_decoder_memory.json"
SIDES = ("flex", "blocked")
SIZES = "32x32x5,48x48x9,64x64x9"


def status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def child(side: str, size: str, out: Path) -> None:
    """One decode on one side; its figures as JSON on stdout, its frames saved to `out`."""
    sys.path.insert(0, str(ROOT / "src"))
    import torch

    from inline_core.families.ltx2.kit import LATENT_CHANNELS
    from inline_core.families.ltx2.kit_ltx25 import DECODER_CONFIG, build_decoder
    from inline_core.families.ltx2.neighborhood_attention import use_blocked_attention

    width, height, frames = (int(n) for n in size.split("x"))
    ratio_s = DECODER_CONFIG["spatial_compression_ratio"]
    ratio_t = DECODER_CONFIG["temporal_compression_ratio"]
    shape = (1, LATENT_CHANNELS, (frames - 1) // ratio_t + 1, height // ratio_s, width // ratio_s)
    decoder: Any = build_decoder()
    if side == "blocked":
        use_blocked_attention(decoder)
    latents = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    before = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again here
    start = time.perf_counter()
    with torch.inference_mode():
        decoded = decoder.decode(
            latents, generator=torch.Generator().manual_seed(11), return_dict=False
        )[0]
    seconds = time.perf_counter() - start
    peak = status_mb("VmHWM")
    torch.save(decoded, out)
    print(json.dumps({"beforeMb": before, "peakMb": peak, "decodeS": seconds}))


def run_side(side: str, size: str, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", side, "--size", size, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"failed": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=SIZES)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--child", choices=SIDES)
    parser.add_argument("--size")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.size, Path(args.out))
        return 0
    sides = [s for s in args.sides.split(",") if s]
    if any(s not in SIDES for s in sides):
        parser.error(f"sides: {SIDES}")
    import torch

    rows: list[dict[str, Any]] = []
    load_start = os.getloadavg()[0]
    header = (
        f"{'size':10} {'side':8} {'peak MB':>9} {'decode MB':>10} {'seconds':>8} {'max diff':>9}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for size in [s for s in args.sizes.split(",") if s]:
            found: dict[str, Any] = {}
            for side in sides:
                out = Path(tmp) / f"{side}-{size}.pt"
                found[side] = run_side(side, size, out)
                if "failed" not in found[side]:
                    found[side]["decodeMb"] = found[side]["peakMb"] - found[side]["beforeMb"]
            paths = [Path(tmp) / f"{side}-{size}.pt" for side in SIDES]
            diff = None
            if all(p.exists() for p in paths):
                flex, blocked = (torch.load(p) for p in paths)
                diff = float((flex - blocked).abs().max())
            for side in sides:
                r = found[side]
                rows.append({"size": size, "side": side, **r, "maxDiff": diff})
                if "failed" in r:
                    print(f"{size:10} {side:8} {r['failed']}")
                    continue
                shown = "-" if diff is None else f"{diff:.1e}"
                print(
                    f"{size:10} {side:8} {r['peakMb']:9.0f} {r['decodeMb']:10.0f} "
                    f"{r['decodeS']:8.2f} {shown:>9}"
                )
    result = {"rows": rows, "loadStart": load_start, "loadEnd": os.getloadavg()[0]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(f"load {load_start:.1f} -> {result['loadEnd']:.1f}; wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
