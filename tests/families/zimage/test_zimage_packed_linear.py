"""Z-Image on the CPU profile in bfloat16 where the policy packs the denoiser's linear weights
(`diffusion/packed_linear.py`; a CPU with native bfloat16): its renders equal those of a runtime
that does not pack (`--no-compile`), a LoRA stack too (fused and per-row forwards), and the
LoRA still changes the picture."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import torch
from lora_harness import Stack, picks
from torch import nn
from zimage_harness import make_runner, max_diff, render, take_pixels

from inline_core.diffusion.packed_linear import PackedLinear, packed_bytes
from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler

pytestmark = pytest.mark.skipif(
    not cast(Any, torch.ops.mkldnn)._is_mkldnn_bf16_supported(),
    reason="oneDNN's bfloat16 matmul needs AVX512 (the packed layers are only made there)",
)
PARAMS: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "guidance": 0.0}
TWO: Stack = [("a", 0.8), ("b", 0.5)]


def transformer(runner: FamilyRig) -> nn.Module:
    model: nn.Module = runner.pipeline().denoiser.transformer
    return model


def test_packed_renders_equal_unpacked_with_and_without_a_lora(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    packed = make_runner(kit.root, sampler, dtype="bfloat16")
    if not packed.runtime.packed_linear_choice(packed.family).enabled:
        pytest.skip("this CPU has no native bfloat16: the policy does not pack here")
    plain = make_runner(kit.root, sampler, dtype="bfloat16", no_compile=True)
    assert not plain.runtime.packed_linear_choice(plain.family).enabled
    prompt = "a lighthouse at dusk"
    ours = take_pixels(render(packed, tmp_path, prompt, **PARAMS))
    theirs = take_pixels(render(plain, tmp_path, prompt, **PARAMS))
    assert max_diff(ours, theirs) == 0
    model = transformer(packed)
    assert any(type(m) is PackedLinear for m in model.modules()) and packed_bytes(model) > 0
    assert packed_bytes(transformer(plain)) == 0

    lora_ours = take_pixels(
        render(packed, tmp_path, prompt, loras=picks(packed, kit, TWO), **PARAMS)
    )
    lora_theirs = take_pixels(
        render(plain, tmp_path, prompt, loras=picks(plain, kit, TWO), **PARAMS)
    )
    assert max_diff(lora_ours, lora_theirs) == 0
    assert max_diff(lora_ours, ours) > 10  # the LoRA applies on the packed model
