"""LTX-2.5's diffusion video decoder read from ComfyUI's video VAE file in `vae/`
(`diffusion_vae_file.py`, `diffusion_vae_load.py`), where the diffusers folder has no
`diffusion_decoder/`: its header's config is the folder decoder's, the model read from it is the
folder's weight for weight, and a render with it equals the render with the folder's decoder.
Without either, with two files, or with a file that cannot be read, a 422 says so at submit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import PROMPT, ltx2_rig, node_params, render, take_frames

from inline_core.diffusion.files.header import read_metadata
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import ModelMissing
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.diffusion_vae_file import diffusers_config
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.kit_ltx25 import FOLDER
from inline_core.families.ltx2.kit_ltx25_vae_file import FILE, write_diffusion_vae_file
from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER
from inline_core.families.ltx2.ltx25_decode import load_decoder
from inline_core.sampling.loop import StepLoopSampler

RENDER: dict[str, Any] = {"model": FOLDER, "width": 32, "height": 32, "frames": 5, "steps": 2}


@pytest.fixture(scope="module")
def root(ltx25_kit: LTX2Kit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2.5 kit without its folder's `diffusion_decoder/`, its decoder as ComfyUI's file."""
    import torch

    models = tmp_path_factory.mktemp("ltx25-vae-file") / "models"
    shutil.copytree(ltx25_kit.root, models, ignore=shutil.ignore_patterns(DECODER_SUBFOLDER))
    decoder = load_decoder(ltx25_kit.diffusers_dir / DECODER_SUBFOLDER, torch.float32)
    write_diffusion_vae_file(decoder, models / "vae" / FILE)
    return models


def test_the_file_s_config_is_the_folder_decoder_s(ltx25_kit: LTX2Kit, root: Path) -> None:
    folder = json.loads((ltx25_kit.diffusers_dir / DECODER_SUBFOLDER / "config.json").read_text())
    wanted = {k: v for k, v in folder.items() if not k.startswith("_") and k != "scaling_factor"}
    assert json.loads(json.dumps(diffusers_config(root / "vae" / FILE))) == wanted


def test_the_decoder_read_from_the_file_decodes_as_the_folder_s(
    ltx25_kit: LTX2Kit, root: Path
) -> None:
    import torch

    ours: Any = load_decoder(root / "vae" / FILE, torch.float32)
    theirs: Any = load_decoder(ltx25_kit.diffusers_dir / DECODER_SUBFOLDER, torch.float32)
    mine, want = ours.state_dict(), theirs.state_dict()
    assert mine.keys() == want.keys()
    assert all(torch.equal(mine[k], want[k]) for k in want)
    latents = torch.randn(1, 128, 2, 4, 4, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        a = ours.decode(latents, generator=torch.Generator().manual_seed(5), return_dict=False)[0]
        b = theirs.decode(latents, generator=torch.Generator().manual_seed(5), return_dict=False)
    assert a.shape == b[0].shape and torch.equal(a, b[0]) and float(a.std()) > 0


def test_a_render_with_the_file_equals_one_with_the_folder_s_decoder(
    ltx25_kit: LTX2Kit, root: Path, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = ltx2_rig(root, ltx2_sampler)
    params = node_params(**RENDER)
    rig.check("l", params)
    lowered = rig.family.lower(NODE_TYPE, params, {"prompt": PROMPT}, "l", rig.sources(FOLDER))
    assert lowered.request["diffusion_decoder"] == str(root / "vae" / FILE)
    with_file = take_frames(render(rig, tmp_path / "file", **RENDER))
    folder_rig = ltx2_rig(ltx25_kit.root, ltx2_sampler)
    with_folder = take_frames(render(folder_rig, tmp_path / "folder", **RENDER))
    assert with_file.shape == (5, 32, 32, 3) and with_file.std() > 1.0
    assert np.array_equal(with_file, with_folder)


def _gated(path: Path) -> None:
    import torch

    state = load_safetensors(path)
    state["decoder.diff_blocks.0.gate_msa"] = torch.ones(8)
    save_safetensors(state, path, read_metadata(path))


def _second(path: Path) -> None:
    shutil.copy(path, path.with_name("ltx-2.5-video-vae-copy.safetensors"))


def _gone(path: Path) -> None:
    path.unlink()


def _no_config(path: Path) -> None:
    save_safetensors(load_safetensors(path), path, None)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_gone, "holds no ComfyUI LTX-2.5 video VAE file"),
        (_second, "keep one"),
        (_gated, "are gated"),
        (_no_config, "no __metadata__['config']"),
    ],
    ids=["none", "two", "gated", "no-config"],
)
def test_a_2_5_stack_without_a_decoder_it_can_read_is_model_missing_at_submit(
    root: Path, ltx2_sampler: StepLoopSampler, tmp_path: Path, change: Any, said: str
) -> None:
    models = tmp_path / "models"
    shutil.copytree(root, models)
    change(models / "vae" / FILE)
    with pytest.raises(ModelMissing) as caught:
        ltx2_rig(models, ltx2_sampler).check("l", node_params(**RENDER))
    assert said in caught.value.message
