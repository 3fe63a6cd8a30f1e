"""Qwen-Image-Edit 2511 from the kit's file in Comfy-Org's layout (diffusers' names and
ComfyUI's empty `__index_timestep_zero__` marker) and from a diffusers folder: the marker turns
on diffusers' `zero_cond_t` (the references modulated at timestep zero) and is not a weight.
The pixels of both equal diffusers' own `QwenImageEditPlusPipeline`: `test_qwen_image_parity.py`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from qwen_harness import (
    EDIT_2511_FOLDER,
    EDIT_2511_MODEL,
    EDIT_MODEL,
    qwen_rig,
)

from inline_core.diffusion.files.shapes import read_shapes
from inline_core.families.qwen_image.files import variant_of
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.families.qwen_image.transformer import ZERO_COND_MARKER, config_of
from inline_core.families.standalone import FamilyRig
from inline_core.models.source import Source
from inline_core.sampling.loop import StepLoopSampler


@pytest.fixture(scope="module")
def rig(qwen_kit: KitPaths, qwen_sampler: StepLoopSampler) -> Iterator[FamilyRig]:
    made = qwen_rig(qwen_kit.root, qwen_sampler)
    yield made
    made.close()


def test_the_file_is_in_comfy_orgs_layout_and_reads_as_2511(qwen_kit: KitPaths) -> None:
    assert qwen_kit.edit_2511_file is not None and qwen_kit.edit_2511_diffusers_dir is not None
    shapes = read_shapes(qwen_kit.edit_2511_file)
    folder = qwen_kit.edit_2511_diffusers_dir / "transformer"
    names = read_shapes(next(folder.glob("*.safetensors")))
    assert shapes is not None and names is not None
    assert shapes[ZERO_COND_MARKER] == (0,)  # ComfyUI's empty buffer
    assert set(shapes) - set(names) == {ZERO_COND_MARKER}  # the diffusers names, and the marker
    single = Source(qwen_kit.edit_2511_file)
    config = config_of(single)
    assert config is not None and config["zero_cond_t"] is True
    assert variant_of(single) == "edit"
    assert variant_of(Source(qwen_kit.edit_2511_diffusers_dir)) == "edit"


@pytest.mark.parametrize("model", [EDIT_2511_MODEL, EDIT_2511_FOLDER], ids=["comfy", "diffusers"])
def test_the_loaded_transformer_modulates_references_at_timestep_zero(
    rig: FamilyRig, model: str
) -> None:
    transformer: Any = rig.pipeline(model).denoiser.transformer
    assert transformer.zero_cond_t is True
    assert rig.pipeline(EDIT_MODEL).denoiser.transformer.zero_cond_t is False
