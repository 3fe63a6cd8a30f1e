"""Lightricks' latent upsampler as one file (`latent_upscale_models/ltx-2-spatial-upscaler-x2-*
.safetensors`, as ComfyUI's LatentUpscaleModelLoader reads it): configured from the JSON in its
header, its weights loaded strictly. The two-stage render with the file equals the render with
the same weights as a diffusers folder; a file without its config, a temporal upscaler or a file
missing keys is a 422 naming it, at submit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import ltx2_rig, node_params, render, take_audio, take_frames

from inline_core.diffusion.libs import load_safetensors, module, save_safetensors
from inline_core.errors import ModelMissing
from inline_core.families.ltx2.kit import FOLDER, LTX2Kit
from inline_core.families.ltx2.kit_single_file import UPSAMPLER_FILE, write_upsampler_file
from inline_core.families.ltx2.upsampler_file import diffusers_config
from inline_core.sampling.loop import StepLoopSampler

# The first pass at 32x32, the refining pass at 64x64.
RENDER: dict[str, Any] = {
    "width": 64,
    "height": 64,
    "frames": 5,
    "steps": 2,
    "seed": 5,
    "upscale": True,
    "guidance": 3.0,
}


@pytest.fixture(scope="module")
def root(ltx2_kit: LTX2Kit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kit's diffusers folder (its own `latent_upsampler/`), and the same upsampler as
    Lightricks' file in `latent_upscale_models/`."""
    models = tmp_path_factory.mktemp("ltx2-upsampler") / "models"
    shutil.copytree(ltx2_kit.diffusers_dir, models / "diffusion_models" / FOLDER)
    ltx2: Any = module("diffusers.pipelines.ltx2.latent_upsampler")
    folder = ltx2_kit.diffusers_dir / "latent_upsampler"
    model = ltx2.LTX2LatentUpsamplerModel.from_pretrained(str(folder), local_files_only=True)
    write_upsampler_file(model, models / "latent_upscale_models" / UPSAMPLER_FILE)
    return models


def test_the_file_s_header_config_is_the_folder_s(ltx2_kit: LTX2Kit, root: Path) -> None:
    folder = json.loads((ltx2_kit.diffusers_dir / "latent_upsampler" / "config.json").read_text())
    config = diffusers_config(root / "latent_upscale_models" / UPSAMPLER_FILE)
    assert config == {k: v for k, v in folder.items() if not k.startswith("_")}


def test_a_two_stage_render_with_the_file_equals_one_with_the_folder(
    root: Path, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(root, ltx2_sampler)
    with_file = render(rig, tmp_path / "file", upscale_model=UPSAMPLER_FILE, **RENDER)
    with_folder = render(rig, tmp_path / "folder", **RENDER)  # the model folder's own
    frames = take_frames(with_file)
    assert frames.shape == (5, 64, 64, 3) and frames.std() > 1.0
    assert np.array_equal(frames, take_frames(with_folder))
    assert np.array_equal(take_audio(with_file).samples, take_audio(with_folder).samples)


def _header(config: dict[str, Any] | None, drop: str = "") -> Any:
    def change(path: Path) -> None:
        state = {k: v for k, v in load_safetensors(path).items() if k != drop}
        save_safetensors(state, path, None if config is None else {"config": json.dumps(config)})

    return change


LIGHTRICKS = {"in_channels": 128, "mid_channels": 32, "num_blocks_per_stage": 1, "dims": 3}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_header(None), "no __metadata__['config']"),
        (_header({**LIGHTRICKS, "temporal_upsample": True}), "temporal upscaler"),
        (_header(LIGHTRICKS, "final_conv.weight"), "lacks final_conv.weight"),
    ],
    ids=["no-config", "temporal", "missing-key"],
)
def test_a_bad_upsampler_file_is_model_missing_at_submit_naming_it(
    root: Path, ltx2_sampler: StepLoopSampler, tmp_path: Path, change: Any, said: str
) -> None:
    bad = tmp_path / "models"
    shutil.copytree(root, bad)
    path = bad / "latent_upscale_models" / UPSAMPLER_FILE
    change(path)
    with pytest.raises(ModelMissing) as caught:
        ltx2_rig(bad, ltx2_sampler).check("l", node_params(upscale_model=UPSAMPLER_FILE, **RENDER))
    assert str(path) in caught.value.message and said in caught.value.message
