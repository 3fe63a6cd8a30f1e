"""Qwen-Image-Edit 2511 from the kit's file in Comfy-Org's layout (diffusers' names and
ComfyUI's empty `__index_timestep_zero__` marker) and from a diffusers folder: the marker turns
on diffusers' `zero_cond_t` (the references modulated at timestep zero) and is not a weight.
The pixels of both equal diffusers' own `QwenImageEditPlusPipeline`: `test_qwen_image_parity.py`.
Comfy-Org's `qwen_image_edit_2511_fp8mixed` layout (fp8 layers with ComfyUI's per-layer
`weight_scale`, `input_scale` and `comfy_quant`, the marker a 0-dim tensor) loads as 2511 and
computes what the same numbers upcast by hand compute."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from qwen_harness import (
    EDIT_2511_FOLDER,
    EDIT_2511_MODEL,
    EDIT_MODEL,
    qwen_rig,
)

from inline_core.device.policy import Placement
from inline_core.diffusion.files.shapes import read_shapes
from inline_core.diffusion.layer_cast import ScaledCastLinear
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.diffusion.loading import load_component
from inline_core.families.qwen_image.files import variant_of
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.families.qwen_image.transformer import FORMAT, ZERO_COND_MARKER, config_of
from inline_core.families.standalone import FamilyRig
from inline_core.models.source import Source
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.fp8_files import write_fp8

FLOAT32 = Placement(device="cpu", dtype="float32")


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


def edit_inputs(transformer: Any) -> dict[str, Any]:
    """One forward of an edit: a 2x3 output grid and a 2x2 reference after it."""
    g = torch.Generator().manual_seed(0)
    config = transformer.config
    return {
        "hidden_states": torch.randn(1, 10, config.in_channels, generator=g),
        "encoder_hidden_states": torch.randn(1, 5, config.joint_attention_dim, generator=g),
        "timestep": torch.tensor([0.7]),
        "img_shapes": [[(1, 2, 3), (1, 2, 2)]],
        "return_dict": False,
    }


def test_comfy_orgs_fp8mixed_2511_file_loads_as_2511_and_computes_its_numbers(
    qwen_kit: KitPaths, tmp_path: Path
) -> None:
    assert qwen_kit.edit_2511_file is not None
    source = tmp_path / "source.safetensors"  # the marker as the fp8 repackages hold it
    weights = load_safetensors(qwen_kit.edit_2511_file)
    save_safetensors({**weights, ZERO_COND_MARKER: torch.tensor(0.0)}, source)
    fp8, by_hand = tmp_path / "qwen_image_edit_2511_fp8mixed.safetensors", tmp_path / "hand.st"
    write_fp8(source, fp8, by_hand, scaled=True, dtype=torch.float8_e4m3fn, mixed=True)
    written = load_safetensors(fp8)
    assert written[ZERO_COND_MARKER].shape == ()
    assert written["transformer_blocks.0.attn.to_q.comfy_quant"].dtype == torch.uint8
    assert written["transformer_blocks.0.attn.to_q.weight_scale"].shape == ()
    assert variant_of(Source(fp8)) == "edit"
    kept = Placement(device="cpu", dtype="float32", storage="float8_e4m3fn")
    model: Any = load_component(FORMAT, Source(fp8), kept)
    reference: Any = load_component(FORMAT, Source(by_hand), FLOAT32)
    assert model.zero_cond_t is True and reference.zero_cond_t is True
    q = model.get_submodule("transformer_blocks.0.attn.to_q")
    assert isinstance(q, ScaledCastLinear) and q.weight.dtype == torch.float8_e4m3fn
    with torch.inference_mode():
        want = reference(**edit_inputs(reference))[0]
        got = model(**edit_inputs(model))[0]
    # The same numbers (each layer's weight times its scale is the reference's weight), yet
    # the outputs may differ by an ulp or two (1.8e-7 near 2 here): the summation order oneDNN
    # picks for a weight made per forward and for a parameter.
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
