"""An all-in-one Wan checkpoint in `models/checkpoints/` (ComfyUI's layout; the UMT5 under
`text_encoders.umt5xxl.transformer.`): the model, VAE and text encoder are each read as a view of
the one file, and a render from it has the pixels of the split files (its tokenizer from the usual
`text_encoders/*umt5*tokenizer*` folder)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from wan_harness import render, take_frames, wan_rig

from inline_core.families.wan.kit import WanKit
from inline_core.models.source import Source
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.checkpoint_files import write_checkpoint

CHECKPOINT = "checkpoints/wan_tiny_aio.safetensors"


def test_a_wan_checkpoint_renders_the_pixels_of_its_split_files(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    kit = wan_kit
    assert kit.diffusion_file is not None and kit.vae_file is not None
    assert kit.text_encoder_file is not None and kit.tokenizer_dir is not None
    whole, split = tmp_path / "whole", tmp_path / "split"
    write_checkpoint(
        whole / CHECKPOINT,
        {
            "model.diffusion_model.": kit.diffusion_file,
            "first_stage_model.": kit.vae_file,
            "text_encoders.umt5xxl.transformer.": kit.text_encoder_file,
        },
    )
    for file, category in (
        (kit.diffusion_file, "diffusion_models"),
        (kit.vae_file, "vae"),
        (kit.text_encoder_file, "text_encoders"),
    ):
        (split / category).mkdir(parents=True, exist_ok=True)
        shutil.copy(file, split / category / file.name)
    for root in (whole, split):
        shutil.copytree(kit.tokenizer_dir, root / "text_encoders" / kit.tokenizer_dir.name)

    from_checkpoint = wan_rig(whole, wan_sampler)
    sources = from_checkpoint.family.files.resolve().require("w")
    path = whole / CHECKPOINT
    assert sources.get("transformer") == Source(path, view="model.diffusion_model.")
    assert sources.get("vae") == Source(path, view="first_stage_model.")
    assert sources.get("text_encoder") == Source(path, view="text_encoders.umt5xxl.")
    got = take_frames(render(from_checkpoint, tmp_path))
    want = take_frames(render(wan_rig(split, wan_sampler), tmp_path))
    # The same weights at other byte offsets: the CPU's kernels may round a last bit apart
    # (`test_zimage_checkpoint`); a level at most, on few values.
    assert int(np.abs(got - want).max()) <= 1 and float(np.not_equal(got, want).mean()) < 0.001
