"""Linear layers computing from oneDNN-packed weights (`diffusion/packed_linear.py`): a tiny and
a mid-size Z-Image transformer in bfloat16 give eager's numbers; a LoRA's fused weight, a weight
patched in place and a per-row hook all still apply; a deep copy and a compiled forward compute
with `F.linear`; the packed copies count in the part's footprint."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from inline_core.diffusion.footprint import footprint
from inline_core.diffusion.libs import manual_seed
from inline_core.diffusion.packed_linear import (
    PackedLinear,
    pack_linears,
    pack_part,
    packable_bytes,
    packed_bytes,
)
from inline_core.families.zimage.kit import build_transformer

pytestmark = pytest.mark.skipif(
    not cast(Any, torch.ops.mkldnn)._is_mkldnn_bf16_supported(),
    reason="oneDNN's bfloat16 matmul needs AVX512 (the packed layers are only made there)",
)
BF16 = torch.bfloat16


def zimage_forward(size: str) -> tuple[nn.Module, Callable[[], torch.Tensor]]:
    manual_seed(0)
    model = build_transformer(size).to(BF16).eval()
    generator = torch.Generator().manual_seed(0)
    latents = [torch.randn(16, 1, 8, 8, generator=generator).to(BF16)]
    prompt = [torch.randn(20, int(model.config.cap_feat_dim), generator=generator).to(BF16)]
    t = torch.full((1,), 0.5, dtype=BF16)

    def call() -> torch.Tensor:
        with torch.no_grad():
            return torch.stack(model(latents, t, prompt, return_dict=False)[0])

    return model, call


@pytest.mark.parametrize("size", ["tiny", "mid"])
def test_a_packed_zimage_transformer_equals_eager(size: str) -> None:
    model, call = zimage_forward(size)
    eager = call()
    linears = [m for m in model.modules() if type(m) is nn.Linear]
    packed = pack_linears(model, BF16)
    assert packed == sum(m.weight.numel() * 2 for m in linears) > 0
    assert all(type(m) is PackedLinear for m in linears)
    assert pack_linears(model, BF16) == 0  # once
    out = call()
    # The same oneDNN kernel and order of sums: within one bf16 rounding of eager (bitwise here).
    torch.testing.assert_close(out, eager, rtol=2**-7, atol=0)
    assert torch.equal(out, eager)


def linear(n_in: int = 64, n_out: int = 48) -> nn.Linear:
    manual_seed(1)
    layer = nn.Linear(n_in, n_out, dtype=BF16).eval()
    layer.requires_grad_(False)
    pack_linears(layer, BF16)
    assert type(layer) is PackedLinear
    return layer


def test_a_lora_fused_weight_patched_weight_and_per_row_hook_still_apply() -> None:
    layer = linear()
    x = torch.randn(2, 7, 64, dtype=BF16)
    with torch.no_grad():
        base = layer(x)
        torch.testing.assert_close(base, F.linear(x, layer.weight, layer.bias), rtol=0, atol=0)
        # A fused copy's weight swapped in for a forward (`adapters/fused.py`).
        original = layer.weight
        fused = nn.Parameter(original + 0.25, requires_grad=False)
        layer.weight = fused
        assert torch.equal(layer(x), F.linear(x, fused, layer.bias))
        layer.weight = original
        assert torch.equal(layer(x), base)
        # Patched in place: the version moves, so the packed copy is stale and not used.
        original.add_(0.5)
        assert torch.equal(layer(x), F.linear(x, original, layer.bias))
        assert not torch.equal(layer(x), base)

        # A per-row delta: a forward hook on the layer's output.
        def add_one(_layer: nn.Module, _input: Any, out: torch.Tensor) -> torch.Tensor:
            return out + 1

        handle = layer.register_forward_hook(add_one)
        assert torch.equal(layer(x), F.linear(x, original, layer.bias) + 1)
        handle.remove()


def test_a_deep_copy_and_a_float32_input_compute_with_f_linear() -> None:
    layer = linear()
    x = torch.randn(3, 64, dtype=BF16)
    twin = copy.deepcopy(layer)
    assert packed_bytes(twin) == 0 and packed_bytes(layer) == 64 * 48 * 2
    with torch.no_grad():
        assert torch.equal(twin(x), layer(x))
        wide = nn.Linear(64, 48)  # float32 layers are not packed for bfloat16
        assert pack_linears(wide, BF16) == 0 and type(wide) is nn.Linear


def test_a_compiled_forward_runs_f_linear_inside_the_graph() -> None:
    layer = linear()
    x = torch.randn(5, 64, dtype=BF16)
    compiled = cast(Any, torch).compile(layer, backend="eager", fullgraph=True)
    with torch.no_grad():
        assert torch.equal(compiled(x), F.linear(x, layer.weight, layer.bias))


def test_the_packed_copies_count_in_the_footprint() -> None:
    model = nn.Sequential(nn.Linear(64, 32, dtype=BF16), nn.Linear(32, 8, dtype=BF16))
    before = footprint(model)
    added = pack_linears(model, BF16)
    assert added == (64 * 32 + 32 * 8) * 2
    assert footprint(model).own_bytes == before.own_bytes + added


def test_a_part_whose_copy_would_take_over_half_the_budget_is_not_packed() -> None:
    model = nn.Sequential(nn.Linear(64, 32, dtype=BF16), nn.Linear(32, 8, dtype=BF16))
    wanted = packable_bytes(model, BF16)
    assert wanted == (64 * 32 + 32 * 8) * 2
    assert pack_part(model, "bfloat16", 2 * wanted - 1, "tiny") is model
    assert packed_bytes(model) == 0 and type(model[0]) is nn.Linear
    pack_part(model, "bfloat16", 2 * wanted, "tiny")
    assert packed_bytes(model) == wanted and type(model[0]) is PackedLinear
