"""Pixel parity: a Krea 2 take rendered through the runner and the batched sampler equals what
diffusers' own Krea2Pipeline renders on the CPU (base with guidance and a negative prompt, Turbo
without), from the diffusers folder, with ComfyUI's Qwen-Image VAE file, or from ComfyUI's files
alone (the same weights in their naming)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from krea2_harness import render, rig

from inline_core.config import Config
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.families.standalone import family_rig
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 1


COMFY_VAE = "krea2_tiny_qwen_image_vae.safetensors"
LAYOUTS = {
    "folder": {},
    "comfy-vae": {"vae": COMFY_VAE},
    # ComfyUI's three files: Krea's transformer naming, ComfyUI's Qwen3-VL, the Qwen-Image VAE.
    "comfy-files": {
        "model": "krea2_tiny.safetensors",
        "text_encoder": "qwen3vl_tiny.safetensors",
        "vae": COMFY_VAE,
    },
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_base_matches_krea2_pipeline(
    krea2_kit: Krea2Kit,
    krea_sampler: StepLoopSampler,
    krea_pipe: Any,
    tmp_path: Path,
    layout: str,
) -> None:
    import torch

    params: dict[str, Any] = {"width": 64, "height": 48, "steps": 3, "guidance": 2.0, "seed": 4}
    ours = render(
        rig(krea2_kit, krea_sampler),
        tmp_path,
        "a fox",
        negative_prompt="blurry",
        **LAYOUTS[layout],
        **params,
    )
    ref = krea_pipe(
        prompt="a fox",
        negative_prompt="blurry",
        width=64,
        height=48,
        num_inference_steps=3,
        guidance_scale=2.0,
        generator=torch.Generator("cpu").manual_seed(4),
    ).images[0]
    theirs = np.asarray(ref.convert("RGB"), dtype=np.int16)
    assert ours.shape == (48, 64, 3)
    assert int(np.abs(ours - theirs).max()) <= TOLERANCE
    assert ours.std() > 1.0


@pytest.mark.parametrize("layout", ["folder", "comfy-files"])
def test_turbo_matches_the_distilled_pipeline(
    krea2_kit: Krea2Kit, krea_sampler: StepLoopSampler, krea_pipe: Any, tmp_path: Path, layout: str
) -> None:
    """A folder whose `model_index.json` says `is_distilled`, or a single file named Turbo, is
    Turbo: 8 steps unguided by default, at the fixed shift."""
    import json
    import shutil

    import torch
    from diffusers import Krea2Pipeline  # pyright: ignore[reportPrivateImportUsage]

    root = tmp_path / "models"
    (root / "vae").mkdir(parents=True)
    (root / "text_encoders").mkdir()
    index = json.loads((krea2_kit.diffusers_dir / "model_index.json").read_text())
    if layout == "folder":
        turbo = root / "diffusion_models" / "krea2_turbo_tiny"
        shutil.copytree(krea2_kit.diffusers_dir, turbo)
        (turbo / "model_index.json").write_text(json.dumps({**index, "is_distilled": True}))
    else:
        (root / "diffusion_models").mkdir()
        shutil.copy(
            krea2_kit.transformer_file, root / "diffusion_models" / "krea2_turbo_tiny.safetensors"
        )
        shutil.copy(krea2_kit.text_encoder_file, root / "text_encoders")
        shutil.copy(krea2_kit.vae_file, root / "vae")
    config = Config(models_dir=root, profile="cpu", dtype="float32")
    turbo_rig = family_rig(Krea2Family, root, krea_sampler, config=config)
    ours = render(turbo_rig, tmp_path, "a fox", width=48, height=48, seed=2)
    layers = tuple(index["text_encoder_select_layers"])
    distilled: Any = Krea2Pipeline(
        **krea_pipe.components, text_encoder_select_layers=layers, is_distilled=True
    )
    distilled.set_progress_bar_config(disable=True)
    ref = distilled(
        prompt="a fox",
        width=48,
        height=48,
        num_inference_steps=8,
        guidance_scale=0.0,
        generator=torch.Generator("cpu").manual_seed(2),
    ).images[0]
    assert int(np.abs(ours - np.asarray(ref.convert("RGB"), dtype=np.int16)).max()) <= TOLERANCE
