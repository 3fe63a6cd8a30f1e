"""LTX-2.5's diffusion decoder with its neighbourhood attention computed block by block
(`neighborhood_attention.py`) equals diffusers' own flex path: one attention layer over uneven
grids and kernels, and the tiny kit's whole decoder, within float32 rounding (1e-6 a layer,
1e-5 a decoded frame in [-1, 1]: shorter sums than the whole score matrix's, nothing else); in
bfloat16 within two of its steps.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from inline_core.diffusion.kit import seeded
from inline_core.diffusion.libs import diffusers
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER
from inline_core.families.ltx2.ltx25_decode import load_decoder
from inline_core.families.ltx2.neighborhood_attention import (
    BlockedNeighborhoodAttnProcessor,
    block_shape,
)

LAYER_TOLERANCE = 1e-6
BF16_TOLERANCE = 4e-3  # two bfloat16 steps at the layer's outputs (under 1)
DECODE_TOLERANCE = 1e-5


def diffusers_layer(dim: int, kernel: tuple[int, int, int]) -> Any:
    from diffusers.models.autoencoders.ltx2_diffusion_decoder import (
        LTX2VideoVaeNeighborhoodAttention,
    )

    seeded(5)
    return LTX2VideoVaeNeighborhoodAttention(dim=dim, kernel_size=kernel, head_dim=8).eval()


@pytest.mark.parametrize(
    ("grid", "kernel", "budget"),
    [
        pytest.param((5, 7, 9), (3, 5, 3), 1 << 24, id="one-block"),
        pytest.param((5, 7, 9), (3, 5, 3), 300, id="uneven-blocks"),
        pytest.param((4, 6, 6), (3, 3, 3), 1, id="one-cell-blocks"),
        pytest.param((3, 8, 5), (3, 7, 5), 2000, id="kernel-as-wide-as-the-grid"),
    ],
)
def test_blocked_attention_equals_diffusers_flex(
    grid: tuple[int, int, int], kernel: tuple[int, int, int], budget: int
) -> None:
    layer = diffusers_layer(16, kernel)  # two heads
    cells = torch.randn(2, *grid, 16, generator=torch.Generator().manual_seed(9))
    with torch.inference_mode():
        flex = layer(cells)
        layer.set_processor(BlockedNeighborhoodAttnProcessor(budget))
        blocked = layer(cells)
    assert blocked.shape == flex.shape
    assert float((blocked - flex).abs().max()) <= LAYER_TOLERANCE
    assert float(flex.abs().max()) > 0.1  # an attention that attended, not zeros


def test_blocked_attention_equals_diffusers_flex_in_bfloat16() -> None:
    """The scores in float32, the weights cast to bfloat16 before the values, as flex's."""
    layer = diffusers_layer(16, (3, 5, 3)).to(torch.bfloat16)
    cells = torch.randn(1, 5, 7, 9, 16, generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        flex = layer(cells.to(torch.bfloat16))
        layer.set_processor(BlockedNeighborhoodAttnProcessor(300))
        blocked = layer(cells.to(torch.bfloat16))
    assert blocked.dtype == torch.bfloat16
    assert float((blocked.float() - flex.float()).abs().max()) <= BF16_TOLERANCE
    assert float(flex.float().abs().max()) < 1.0


def test_a_block_holds_its_budget_of_scores() -> None:
    grid, kernel, heads = (9, 64, 64), (3, 3, 3), 1
    budget = 1 << 20
    block = block_shape(grid, kernel, heads, budget)
    reach = [min(b + k - 1, n) for b, k, n in zip(block, kernel, grid, strict=True)]
    assert heads * math.prod(block) * math.prod(reach) <= budget
    assert math.prod(block) > math.prod(kernel)  # widened past the kernel's box
    assert block_shape((5, 7, 9), (3, 5, 3), 2, 1 << 24) == (5, 7, 9)  # a small grid: one block


def test_the_decoder_decodes_as_diffusers_flex_path(ltx25_kit: LTX2Kit) -> None:
    """The server's decoder (`load_decoder`) against diffusers' `from_pretrained` of the same
    folder, the same latents and generator: a 32x32, 5-frame decode."""
    folder = ltx25_kit.diffusers_dir / DECODER_SUBFOLDER
    ours: Any = load_decoder(folder, torch.float32)
    theirs: Any = diffusers().LTX2VideoDiffusionDecoderModel.from_pretrained(
        str(folder), dtype=torch.float32, local_files_only=True
    )
    processors = {type(p).__name__ for p in ours.attn_processors.values()}
    assert processors == {BlockedNeighborhoodAttnProcessor.__name__}
    assert BlockedNeighborhoodAttnProcessor.__name__ not in {
        type(p).__name__ for p in theirs.attn_processors.values()
    }
    latents = torch.randn(1, 128, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        frames = [
            model.decode(latents, generator=torch.Generator().manual_seed(11), return_dict=False)[0]
            for model in (ours, theirs)
        ]
    assert frames[0].shape == (1, 3, 5, 32, 32)
    assert float((frames[0] - frames[1]).abs().max()) <= DECODE_TOLERANCE
    assert float(frames[0].std()) > 0.01


def test_a_batch_holds_the_budget_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block's scores are batch x heads x queries x keys: the budget counts the batch."""
    from inline_core.families.ltx2 import neighborhood_attention as na

    held: list[int] = []
    real = na._attend  # pyright: ignore[reportPrivateUsage]

    def counted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        held.append(q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2])
        return real(q, k, v, m)

    monkeypatch.setattr(na, "_attend", counted)
    shape = (3, 5, 7, 9, 2, 8)  # a batch of three, two heads
    q, k, v = (torch.randn(shape, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
    budget = 600
    blocked = na.neighborhood_attention(q, k, v, (3, 5, 3), budget)
    assert held and max(held) <= budget
    whole = na.neighborhood_attention(q, k, v, (3, 5, 3), 1 << 24)
    assert float((blocked - whole).abs().max()) <= LAYER_TOLERANCE
