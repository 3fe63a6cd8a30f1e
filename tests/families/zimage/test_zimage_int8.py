"""Z-Image from an int8 transformer file (ComfyUI's `*_int8_convrot` layout: per-row int8 layers,
rotated in Hadamard groups where the group divides a layer's columns, plain int8 elsewhere):
a render has the pixels of the same weights dequantized and rotated back by hand, in float32
and in bfloat16, and through the HTTP API from a models folder (its layers marked one by one or
listed in its header); and so does one from an int8
convrot Qwen3 text encoder file (its embedding table int8 too), read by transformers' loader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from test_zimage_fp8 import models_with, served_render
from zimage_harness import make_runner, render, take_pixels

from inline_core.diffusion.kit_int8 import int8_layers
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.zimage.kit import KitPaths, write_qwen3_single_file
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.int8_files import write_dequantized

GROUP = 16  # divides the tiny model's 32, 64, 256 and 1024 columns, not its 170


def write_int8(kit: KitPaths, tmp_path: Path, dtype: torch.dtype) -> tuple[Path, Path]:
    """(the kit's transformer as an int8 convrot file, the same numbers dequantized by hand)."""
    assert kit.diffusion_file is not None
    int8, by_hand = tmp_path / "int8.safetensors", tmp_path / "by_hand.safetensors"
    save_safetensors(int8_layers(load_safetensors(kit.diffusion_file), group=GROUP), int8)
    write_dequantized(int8, by_hand, dtype)
    return int8, by_hand


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_int8_convrot_transformer_renders_the_pixels_of_its_weights_dequantized_by_hand(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path, dtype: str
) -> None:
    int8, by_hand = write_int8(kit, tmp_path, getattr(torch, dtype))
    header = load_safetensors(int8)
    assert header["layers.0.attention.qkv.weight"].dtype == torch.int8
    stored = make_runner(models_with(kit, tmp_path / "int8", int8), sampler, dtype=dtype)
    upcast = make_runner(models_with(kit, tmp_path / "by_hand", by_hand), sampler, dtype=dtype)
    want = take_pixels(render(upcast, tmp_path, seed=5, steps=2))
    got = take_pixels(render(stored, tmp_path, seed=5, steps=2))
    assert np.array_equal(got, want)
    assert want.std() > 0  # a picture, not a flat field


@pytest.mark.parametrize("listed", [False, True], ids=["per-layer-markers", "file-metadata"])
def test_a_server_renders_from_an_int8_transformer_in_its_models_folder(
    kit: KitPaths, tmp_path: Path, listed: bool
) -> None:
    """ComfyUI's `z_image_turbo_int8_convrot`-style file dropped into `diffusion_models/`:
    picked, and rendered through the HTTP API with the pixels of the hand-dequantized file;
    its layers marked one by one, or listed once in its header (`_quantization_metadata`)."""
    int8, by_hand = write_int8(kit, tmp_path, torch.float32)
    if listed:
        stored = load_safetensors(int8)
        layers = {
            k.removesuffix(".comfy_quant"): json.loads(v.numpy().tobytes())
            for k, v in stored.items()
            if k.endswith(".comfy_quant")
        }
        save_safetensors(
            {k: v for k, v in stored.items() if not k.endswith(".comfy_quant")},
            int8,
            metadata={"_quantization_metadata": json.dumps({"layers": layers})},
        )
    renders = [
        served_render(kit, tmp_path, name, weights)[0]
        for name, weights in (("int8", int8), ("by_hand", by_hand))
    ]
    assert np.array_equal(renders[0], renders[1])


def test_an_int8_convrot_qwen3_text_encoder_renders_like_its_weights_dequantized_by_hand(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    assert kit.diffusion_file is not None and kit.vae_file is not None
    plain = write_qwen3_single_file(tmp_path / "qwen3.safetensors")
    int8, by_hand = tmp_path / "qwen3_int8.safetensors", tmp_path / "qwen3_by_hand.safetensors"
    save_safetensors(int8_layers(load_safetensors(plain), group=GROUP), int8)
    assert load_safetensors(int8)["model.embed_tokens.weight"].dtype == torch.int8
    write_dequantized(int8, by_hand, torch.float32)
    renders: list[np.ndarray] = []
    for name, encoder in (("int8", int8), ("by_hand", by_hand)):
        root = tmp_path / name
        for part, target in ((kit.diffusion_file, "diffusion_models"), (kit.vae_file, "vae")):
            (root / target).mkdir(parents=True)
            shutil.copy(part, root / target / part.name)
        (root / "text_encoders").mkdir()
        shutil.copy(encoder, root / "text_encoders" / "qwen_3_4b.safetensors")
        renders.append(take_pixels(render(make_runner(root, sampler), tmp_path / name, seed=3)))
    assert np.array_equal(renders[0], renders[1])
