"""Z-Image and FLUX.2 klein on one runtime read one Qwen3 file: it is loaded once (resident bytes
are the two transformers, the two VAEs and one text encoder), and each family reads it its own
way (their encoded prompts differ, and neither's kept prompts are handed to the other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import torch
from flux2_harness import make_rig, render, run_node

from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.footprint import footprint
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.pipeline import Flux2StepPipeline
from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage import ZIMAGE_DESCRIPTOR, ZImageFamily
from inline_core.families.zimage.kit import build_kit as build_zimage_kit
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.sampling.loop import StepLoopSampler

ENCODER = "flux2_tiny_qwen3"  # the kit's Qwen3: as wide as Z-Image's tiny captions


@pytest.fixture(scope="module")
def both(flux2_kit: Flux2Kit) -> Path:
    """One models folder holding both kits (ComfyUI layout)."""
    build_zimage_kit(flux2_kit.root, layouts=("comfy",))
    return flux2_kit.root


def zimage_on(rig: FamilyRig) -> FamilyRig:
    """Z-Image on the same runtime (one residency) as `rig`."""
    return FamilyRig(
        ZImageFamily(rig.catalog, rig.config.env), rig.runtime, rig.catalog, rig.config
    )


def test_one_qwen3_copy_two_readings(both: Path, sampler: StepLoopSampler, tmp_path: Path) -> None:
    klein = make_rig(both, sampler)
    zimage = zimage_on(klein)
    z_params: dict[str, Any] = {"model": "zimage_tiny.safetensors", "text_encoder": ENCODER}
    defaults = {p.name: p.default for p in ZIMAGE_DESCRIPTOR.params}
    z_run = {**defaults, "width": 64, "height": 64, "steps": 2, "seed": 3, **z_params}
    run_node(zimage, tmp_path, z_run, {"prompt": "a red fox"})
    loaded_before = klein.runtime.residency.stats().loads
    render(klein, tmp_path, "a red fox", model="flux2_klein_tiny.safetensors", text_encoder=ENCODER)
    z_pipe = cast(
        ZImageStepPipeline,
        zimage.runtime.stacks().pipeline(
            zimage.family, zimage.family.resolve("alibaba/z-image-turbo", z_params).require()
        ),
    )
    k_pipe = cast(
        Flux2StepPipeline,
        klein.runtime.stacks().pipeline(
            klein.family,
            klein.family.resolve(
                "bfl/flux-2", {"model": "flux2_klein_tiny.safetensors", "text_encoder": ENCODER}
            ).require(),
        ),
    )
    # One loaded Qwen3 serves both; klein loaded its transformer and VAE only (and its
    # scheduler config, which holds no weights).
    assert z_pipe.text_encoder.model is k_pipe.text_encoder.model
    assert klein.runtime.residency.stats().loads - loaded_before == 3
    modules: list[torch.nn.Module] = [
        z_pipe.denoiser.transformer,
        z_pipe.vae.autoencoder,
        z_pipe.text_encoder.model,
        k_pipe.transformer,
        k_pipe.vae.autoencoder,
    ]
    expected = sum(footprint(m).own_bytes + footprint(m).mapped_bytes for m in modules)
    stats = klein.runtime.residency.stats()
    assert stats.resident_bytes + stats.mapped_bytes == expected
    shared = klein.runtime.stacks().shared()
    assert sorted((s["part"], s["format"], s["families"]) for s in shared) == [
        ("text_encoder", "qwen3", ["flux-2", "z-image"]),
        ("tokenizer", "qwen3", ["flux-2", "z-image"]),
    ]
    # The same prompt, read two ways: Z-Image's second to last layer of the real tokens, klein's
    # three layers over 512 padded tokens.
    z_cond = cast(torch.Tensor, z_pipe.text_encoder.encode("a red fox").value)
    k_cond = cast(torch.Tensor, k_pipe.text_encoder.encode("a red fox").value)
    assert z_cond.shape[1] == 32 and k_cond.shape == (512, 96)
    assert not torch.equal(z_cond, k_cond[: z_cond.shape[0], 64:])


def test_kept_prompts_are_keyed_on_the_reading() -> None:
    from inline_core.components.interfaces import Conditioning

    memo = PromptMemo()
    one = memo.encode("a fox", lambda _p: Conditioning(value=torch.zeros(2, 4), tokens=2), "a")
    two = memo.encode("a fox", lambda _p: Conditioning(value=torch.ones(2, 4), tokens=2), "b")
    assert one is not two and len(memo) == 2 and memo.misses == 2
