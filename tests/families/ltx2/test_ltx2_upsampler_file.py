"""Lightricks' latent upsampler as one file (`latent_upscale_models/ltx-2-spatial-upscaler-x2-*
.safetensors`, as ComfyUI's LatentUpscaleModelLoader reads it): configured from the JSON in its
header, its weights loaded strictly. The two-stage render with the file equals the render with
the same weights as a diffusers folder, and the take names the upsampler that ran; a file
without its config, a temporal upscaler or a file missing keys is a 422 naming it, at submit.
An upsampler made for another LTX-2 version (LTX-2.3's plain pixel shuffle on this 2.0 stack,
`upsampler_version.py`) is refused naming both versions and the file, and one named by no param
is the one made for the stack's version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import PROMPT, ltx2_rig, node_params, render, take_audio, take_frames

from inline_core.diffusion.libs import load_safetensors, module, save_safetensors
from inline_core.errors import InlineError, InvalidRequest, ModelMissing
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.kit import FOLDER, LTX2Kit, build_upsampler
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
    write_upsampler_file(build_upsampler(ltx20=False), models / "latent_upscale_models" / LATER)
    return models


LATER = "ltx-2.3-spatial-upscaler-x2-tiny.safetensors"  # made as LTX-2.3's (a plain shuffle)


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
    ran = [r.takes[0].params["upscale_model"] for r in (with_file, with_folder)]
    own = f"diffusion_models/{FOLDER}/latent_upsampler"
    assert ran == [f"latent_upscale_models/{UPSAMPLER_FILE}", own]


def _header(config: dict[str, Any] | None, drop: str = "") -> Any:
    def change(path: Path) -> None:
        state = {k: v for k, v in load_safetensors(path).items() if k != drop}
        save_safetensors(state, path, None if config is None else {"config": json.dumps(config)})

    return change


LIGHTRICKS = {
    "in_channels": 128,
    "mid_channels": 32,
    "num_blocks_per_stage": 1,
    "dims": 3,
    "rational_resampler": True,
}


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


def test_an_upsampler_made_for_another_version_is_a_422_at_submit_naming_both(
    root: Path, ltx2_sampler: StepLoopSampler
) -> None:
    rig = ltx2_rig(root, ltx2_sampler)
    with pytest.raises(InvalidRequest) as caught:
        rig.check("l", node_params(upscale_model=LATER, **RENDER))
    said = caught.value.message
    assert caught.value.status == 422 and "param 'upscale_model'" in said
    assert str(root / "latent_upscale_models" / LATER) in said
    assert "made for LTX-2.3 or later" in said and "this model is LTX-2.0" in said


@pytest.fixture(scope="module")
def bare(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The models folder without the model folder's own upsampler: both files, 2.0's and 2.3's,
    in `latent_upscale_models/`."""
    models = tmp_path_factory.mktemp("ltx2-bare") / "models"
    shutil.copytree(root, models, ignore=shutil.ignore_patterns("latent_upsampler"))
    return models


def lowered_upsampler(models: Path, sampler: StepLoopSampler) -> str:
    """The upsampler a two-stage render with no `upscale_model` would run, as its take says."""
    rig = ltx2_rig(models, sampler)
    params = node_params(**RENDER)
    rig.check("l", params)
    lowered = rig.family.lower(NODE_TYPE, params, {"prompt": PROMPT}, "l", rig.sources(FOLDER))
    return str(lowered.take_params["upscale_model"])


def test_an_upsampler_named_by_no_param_is_the_one_made_for_the_stack_s_version(
    bare: Path, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    assert lowered_upsampler(bare, ltx2_sampler) == f"latent_upscale_models/{UPSAMPLER_FILE}"
    only_later = tmp_path / "models"
    shutil.copytree(bare, only_later)
    (only_later / "latent_upscale_models" / UPSAMPLER_FILE).unlink()
    with pytest.raises(InlineError) as caught:
        lowered_upsampler(only_later, ltx2_sampler)
    assert isinstance(caught.value, ModelMissing)
    said = caught.value.message
    assert str(only_later / "latent_upscale_models" / LATER) in said
    assert "made for LTX-2.3 or later" in said and "this model is LTX-2.0" in said
