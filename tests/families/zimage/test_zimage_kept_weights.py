"""A part whose float32 copy would take more than half the memory budget keeps its weights in its
file's bfloat16, mapped, and casts them layer by layer as it computes (`device/storage.py`). The
float32 copy of a bfloat16 weight holds the very numbers the layer casts to, so a part computes
what its copy would. Z-Image's timestep embedder casts its frequencies to its first layer's weight
dtype (diffusers' `TimestepEmbedder`), so its format has it converted at load. A part loads the
same way whether its files were in the page cache or not (issue 38's cold start)."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from zimage_harness import make_runner, render, take_pixels

from inline_core.device.policy import Placement
from inline_core.diffusion.footprint import footprint
from inline_core.diffusion.layer_cast import CastLinear
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.zimage.build import ZImageBuilder
from inline_core.families.zimage.kit import KitPaths
from inline_core.models.source import Source
from inline_core.sampling.loop import StepLoopSampler
from tests.page_cache import drop_from_page_cache

PARTS = ("diffusion_models/zimage_tiny.safetensors", "vae", "text_encoders/zimage_tiny_qwen3")
COPIED = Placement(device="cpu", dtype="float32")
KEPT = Placement(device="cpu", dtype="float32", storage="bfloat16")


@pytest.fixture(scope="module")
def bf16_models(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kit's single-file stack with every weight file stored in bfloat16."""
    root = tmp_path_factory.mktemp("bf16-models")
    for part in PARTS:
        source, target = kit.root / part, root / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)
    for file in root.rglob("*.safetensors"):
        tensors = load_safetensors(file)
        save_safetensors({k: v.to(torch.bfloat16) for k, v in tensors.items()}, file)
    return root


def test_a_kept_text_encoder_is_mapped_and_encodes_exactly_what_its_float32_copy_does(
    bf16_models: Path,
) -> None:
    source = Source(bf16_models / "text_encoders" / "zimage_tiny_qwen3")
    copied = ZImageBuilder.load("text_encoder", source, COPIED)
    kept = ZImageBuilder.load("text_encoder", source, KEPT)
    linears = [m for m in kept.modules() if isinstance(m, CastLinear)]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    assert {p.dtype for p in copied.parameters()} == {torch.float32}
    assert footprint(kept).mapped_bytes > 0 and footprint(copied).mapped_bytes == 0
    ids = torch.randint(0, 200, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        want = copied(input_ids=ids, output_hidden_states=True).hidden_states[-2]
        got = kept(input_ids=ids, output_hidden_states=True).hidden_states[-2]
    assert got.dtype == torch.float32 and torch.equal(got, want)


Layout = list[tuple[str, torch.dtype, tuple[int, ...], int]]


def loaded_state(part: torch.nn.Module) -> tuple[int, int, Layout]:
    """How a loaded part holds its weights: own and mapped bytes, and each tensor's dtype,
    strides and alignment."""
    cost = footprint(part)
    tensors = [*part.named_parameters(), *part.named_buffers()]
    layout: Layout = [(n, t.dtype, t.stride(), t.data_ptr() % 64) for n, t in tensors]
    return cost.own_bytes, cost.mapped_bytes, layout


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
@pytest.mark.parametrize("placement", [KEPT, COPIED], ids=["kept", "copied"])
def test_a_part_loads_the_same_way_with_its_files_out_of_the_page_cache(
    bf16_models: Path, placement: Placement
) -> None:
    source = Source(bf16_models / "text_encoders" / "zimage_tiny_qwen3")
    gc.collect()  # no earlier load still maps the files' pages
    drop_from_page_cache(bf16_models)
    cold = loaded_state(ZImageBuilder.load("text_encoder", source, placement))
    warm = loaded_state(ZImageBuilder.load("text_encoder", source, placement))
    assert cold == warm
    assert (cold[1] > 0) == (placement is KEPT)  # kept: mapped from the file; copied: not


def test_a_stack_over_half_the_budget_renders_without_its_copies_the_same_pixels(
    bf16_models: Path, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    copied = make_runner(bf16_models, sampler)  # no budget: float32 copies
    kept = make_runner(bf16_models, sampler, ram_budget_gb=0.001)  # 1 MB
    want = take_pixels(render(copied, tmp_path, seed=5))
    got = take_pixels(render(kept, tmp_path, seed=5))
    assert np.array_equal(got, want)
    copied_stats, kept_stats = copied.runtime.residency.stats(), kept.runtime.residency.stats()
    assert copied_stats.mapped_bytes == 0 and kept_stats.mapped_bytes > 0
    # Each byte left mapped in bfloat16 is two float32 bytes not copied onto the heap.
    assert kept_stats.resident_bytes + 2 * kept_stats.mapped_bytes == copied_stats.resident_bytes
    # Health's residency names each part kept, and what it computes in.
    shown = {row["part"]: row for row in kept.runtime.stats()["keptWeights"]}
    # (The tiny text encoder's copy, 0.1 MB, is under half of the smallest budget, 1 MB.)
    assert set(shown) == {"Z-Image transformer", "Z-Image vae"}
    assert {(row["kept"], row["computes"]) for row in shown.values()} == {("bfloat16", "float32")}
    assert "keptWeights" not in copied.runtime.stats()


def test_a_kept_part_s_nvfp4_layers_dequantize_into_its_kept_dtype(
    bf16_models: Path, tmp_path: Path
) -> None:
    """ComfyUI's NVFP4 layers in a part kept in bfloat16: dequantized in float32 they were the
    very copy the policy declined (twice the kept bytes, for good on diffusers' loader); in
    bfloat16 each is ComfyUI's dequantized weight, cast as its layer computes like the rest."""
    from inline_core.diffusion.kit_nvfp4 import marker, quantize_nvfp4
    from inline_core.diffusion.nvfp4 import dequantize

    state = load_safetensors(bf16_models / PARTS[0])
    mixed, plain = dict(state), dict(state)
    for key, value in state.items():
        stem = key.removesuffix(".weight")
        if stem.startswith("layers.") and stem != key and value.dim() == 2:
            if value.shape[0] % 16 == 0 and value.shape[1] % 16 == 0:
                codes, blocks, scale = quantize_nvfp4(value)
                mixed[key], mixed[f"{stem}.weight_scale"] = codes, blocks
                mixed[f"{stem}.weight_scale_2"] = scale
                mixed[f"{stem}.comfy_quant"] = marker("nvfp4")
                plain[key] = dequantize(codes, blocks, scale, torch.bfloat16)
    assert len(mixed) - len(state) > 12  # more than four layers packed
    save_safetensors(mixed, tmp_path / "nvfp4.safetensors")
    save_safetensors(plain, tmp_path / "plain.safetensors")
    kept = ZImageBuilder.load("transformer", Source(tmp_path / "nvfp4.safetensors"), KEPT)
    want = ZImageBuilder.load("transformer", Source(tmp_path / "plain.safetensors"), KEPT)
    linears = [m for m in kept.modules() if isinstance(m, CastLinear)]
    assert sum(m.weight.dtype == torch.bfloat16 for m in linears) > 4
    got_state, want_state = kept.state_dict(), want.state_dict()
    assert got_state.keys() == want_state.keys()
    for key, value in want_state.items():
        assert got_state[key].dtype == value.dtype and torch.equal(got_state[key], value), key
