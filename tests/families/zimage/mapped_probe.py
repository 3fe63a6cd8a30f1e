"""Loads a Z-Image transformer file through the family's part loader, in a fresh process.

    python mapped_probe.py load FILE DTYPE    # prints JSON: the growth of anonymous RSS, footprint

The file is written by `write` (random float32 weights, small but for width) in the test's own
process. A fresh process for the load, because RSS belongs to the whole process: a test
session's heap (or the writing) would move it."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import torch

from inline_core.device.policy import Placement
from inline_core.diffusion.footprint import footprint
from inline_core.diffusion.kit import write_random_safetensors
from inline_core.diffusion.libs import diffusers
from inline_core.families.zimage.build import ZImageBuilder
from inline_core.families.zimage.transformer import to_original
from inline_core.models.source import Source

# Small in every dimension but width, so the file (about 60 MB) stands well above RSS noise.
CONFIG = {
    "all_patch_size": (2,),
    "all_f_patch_size": (1,),
    "in_channels": 16,
    "dim": 512,
    "n_layers": 2,
    "n_refiner_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 4,
    "qk_norm": True,
    "cap_feat_dim": 32,
    "rope_theta": 256.0,
    "t_scale": 1000.0,
    "axes_dims": [32, 48, 48],
    "axes_lens": [1536, 512, 512],
}


def anonymous_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def warm_up_file(path: Path) -> Path:
    return path.with_name(path.name + ".warm-up")


def write(path: Path) -> None:
    small = {"dim": 128, "n_heads": 1, "n_kv_heads": 1}
    for file, config in ((path, CONFIG), (warm_up_file(path), {**CONFIG, **small})):
        with torch.device("meta"):
            model = diffusers().ZImageTransformer2DModel(**config)
        shapes = {k: tuple(v.shape) for k, v in to_original(model.state_dict()).items()}
        write_random_safetensors(file, shapes, torch.float32, seed=3)


def load(path: Path, dtype: str) -> None:
    placement = Placement(device="cpu", dtype=dtype)
    # A first load of a small file imports and initialises what any load needs.
    ZImageBuilder.load("transformer", Source(warm_up_file(path)), placement)
    gc.collect()
    before = anonymous_rss()
    part = ZImageBuilder.load("transformer", Source(path), placement)
    gc.collect()
    grown = anonymous_rss() - before
    spent = footprint(part)
    result = {
        "fileBytes": path.stat().st_size,
        "anonGrowth": grown,
        "ownBytes": spent.own_bytes,
        "mappedBytes": spent.mapped_bytes,
        "dtype": str(next(part.parameters()).dtype),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    load(Path(sys.argv[2]), sys.argv[3])
