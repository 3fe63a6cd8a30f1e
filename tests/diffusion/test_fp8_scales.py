"""A scaled fp8 file's scales through a format's renaming (`diffusion/fp8_scales.py`): a renamed or
split weight keeps its scale as views of the stored bytes; a weight the renaming copies (a
concatenation) is multiplied out first; ComfyUI's newer `weight_scale` naming is the same scale;
a scale on a weight that is not fp8 is another quantization, refused."""

from __future__ import annotations

import pytest
import torch

from inline_core.diffusion.fp8_scales import convert_scaled, dequantize, split_scales
from inline_core.errors import RunFailed

E4M3 = torch.float8_e4m3fn


def stored(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(E4M3)


def test_renamed_and_split_weights_keep_their_scales_as_views() -> None:
    qkv, out = stored(6, 2, seed=0), stored(2, 2, seed=1)
    raw = {
        "a.qkv.weight": qkv,
        "a.qkv.scale_weight": torch.tensor(0.5),
        "a.qkv.scale_input": torch.tensor(1.0),
        "a.out.weight": out,
        "a.out.weight_scale": torch.tensor([0.25]),  # ComfyUI's newer naming
        "scaled_fp8": torch.empty(0, dtype=E4M3),
    }
    weights, scales = split_scales(raw)
    assert set(weights) == {"a.qkv.weight", "a.out.weight"}
    assert {k: float(v) for k, v in scales.items()} == {"a.qkv.weight": 0.5, "a.out.weight": 0.25}

    def rename(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        q, k, v = sd["a.qkv.weight"].chunk(3)
        return {
            "a.to_q.weight": q,
            "a.to_k.weight": k,
            "a.to_v.weight": v,
            "a.to_out.weight": sd["a.out.weight"],
        }

    converted = convert_scaled(weights, scales, rename, torch.float32)
    assert {k: float(v) for k, v in converted.scales.items()} == {
        "a.to_q.weight": 0.5,
        "a.to_k.weight": 0.5,
        "a.to_v.weight": 0.5,
        "a.to_out.weight": 0.25,
    }
    assert converted.state["a.to_k.weight"].dtype == E4M3  # still the stored bytes


def test_a_weight_the_renaming_copies_is_multiplied_out_before() -> None:
    left, right = stored(2, 2, seed=2), stored(2, 2, seed=3)
    weights = {"l.weight": left, "r.weight": right}
    scales = {"l.weight": torch.tensor(0.5), "r.weight": torch.tensor(2.0)}

    def fuse(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"lr.weight": torch.cat([sd["l.weight"], sd["r.weight"]])}

    converted = convert_scaled(weights, scales, fuse, torch.float32)
    assert converted.scales == {}
    want = torch.cat(
        [
            dequantize(left, scales["l.weight"], torch.float32),
            dequantize(right, scales["r.weight"], torch.float32),
        ]
    )
    assert torch.equal(converted.state["lr.weight"], want)


def test_a_scale_on_a_weight_that_is_not_fp8_is_refused() -> None:
    raw = {"a.weight": torch.zeros(2, 1, dtype=torch.uint8), "a.weight_scale": torch.tensor(1.0)}
    with pytest.raises(RunFailed, match="only fp8 weights"):
        split_scales(raw)
