"""Wan's transformer from an fp8 file (ComfyUI's `*_fp8_e4m3fn` and `*_fp8_scaled`): its layers
stay fp8, mapped, and compute in float32 exactly what the same weights upcast by hand compute."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from inline_core.device.policy import Placement
from inline_core.diffusion.formats import umt5
from inline_core.diffusion.layer_cast import CastLinear, ScaledCastLinear
from inline_core.diffusion.loading import load_component
from inline_core.families.wan.kit import TEXT_DIM, WanKit
from inline_core.families.wan.transformer import FORMAT
from inline_core.models.source import Source
from tests.diffusion.fp8_files import write_fp8

FLOAT32 = Placement(device="cpu", dtype="float32")


def inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {
        "hidden_states": torch.randn(1, 16, 2, 4, 6, generator=g),
        "timestep": torch.tensor([700.0]),
        "encoder_hidden_states": torch.randn(1, 5, TEXT_DIM, generator=g),
    }


@pytest.mark.parametrize(
    ("scaled", "dtype"),
    [(False, torch.float8_e4m3fn), (True, torch.float8_e4m3fn), (True, torch.float8_e5m2)],
)
def test_an_fp8_transformer_computes_what_its_weights_upcast_by_hand_compute(
    wan_kit: WanKit, tmp_path: Path, scaled: bool, dtype: torch.dtype
) -> None:
    assert wan_kit.diffusion_file is not None
    fp8, by_hand = tmp_path / "wan_fp8.safetensors", tmp_path / "wan_by_hand.safetensors"
    write_fp8(wan_kit.diffusion_file, fp8, by_hand, scaled=scaled, dtype=dtype)
    kept = Placement(device="cpu", dtype="float32", storage=str(dtype).removeprefix("torch."))
    model = load_component(FORMAT, Source(fp8), kept)
    reference = load_component(FORMAT, Source(by_hand), FLOAT32)
    linears = [m for m in model.modules() if isinstance(m, CastLinear)]
    stored = [m for m in linears if m.weight.dtype == dtype]
    assert len(stored) > len(linears) // 2  # the blocks' layers stay fp8
    assert all(isinstance(m, ScaledCastLinear) == scaled for m in stored)
    # The time embedder is computed at load: diffusers casts the timestep to its weights' dtype.
    time_embedder = model.get_submodule("condition_embedder.time_embedder")
    assert {p.dtype for p in time_embedder.parameters()} == {torch.float32}
    with torch.inference_mode():
        want = reference(**inputs(), return_dict=False)[0]
        got = model(**inputs(), return_dict=False)[0]
    assert got.dtype == torch.float32 and torch.equal(got, want)


def test_an_fp8_scaled_umt5_encodes_what_its_weights_upcast_by_hand_encode(
    wan_kit: WanKit, tmp_path: Path
) -> None:
    """ComfyUI's `umt5_xxl_fp8_e4m3fn_scaled`: transformers' loader builds it, its fp8 layers are
    put back stored, and `wo` (whose dtype the feed-forward casts its input to) computes at load."""
    assert wan_kit.text_encoder_file is not None
    fp8, by_hand = tmp_path / "umt5_fp8.safetensors", tmp_path / "umt5_by_hand.safetensors"
    write_fp8(wan_kit.text_encoder_file, fp8, by_hand, scaled=True, dtype=torch.float8_e4m3fn)
    kept = Placement(device="cpu", dtype="float32", storage="float8_e4m3fn")
    model = load_component(umt5.FORMAT, Source(fp8), kept)
    reference = load_component(umt5.FORMAT, Source(by_hand), FLOAT32)
    q = model.get_submodule("encoder.block.0.layer.0.SelfAttention.q")
    assert isinstance(q, ScaledCastLinear) and q.weight.dtype == torch.float8_e4m3fn
    wo = model.get_submodule("encoder.block.0.layer.1.DenseReluDense.wo")
    assert isinstance(wo, torch.nn.Linear) and wo.weight.dtype == torch.float32
    ids = torch.randint(0, 200, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # a padded prompt, as the padded-T5 encoder sends
    with torch.inference_mode():
        want = reference(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert got.dtype == torch.float32 and torch.equal(got, want)
