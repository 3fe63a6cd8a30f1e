"""The Z-Image pieces implement the component interfaces and the step protocol they claim."""

from __future__ import annotations

from functools import reduce
from typing import Any

import torch
from torch import nn
from zimage_harness import make_runner

from inline_core.components.interfaces import VAE, Denoiser, Latents, Scheduler, TextEncoder
from inline_core.components.step import StepPipeline, StepState, supports_component_modules
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import model_time
from inline_core.sampling.loop import StepLoopSampler


def test_components_follow_the_interfaces(kit: KitPaths, sampler: StepLoopSampler) -> None:
    runner = make_runner(kit.root, sampler)
    pipeline = runner.pipeline()
    # Assignments to the protocol types are checked statically (pyright) and used below.
    encoder: TextEncoder = pipeline.text_encoder
    denoiser: Denoiser = pipeline.denoiser
    vae: VAE = pipeline.vae
    schedule: Scheduler = FlowMatchSchedule.create(
        pipeline.scheduler_config, 4, 16, torch.device("cpu"), model_time=model_time
    )
    cond = encoder.encode("a prompt")
    assert cond.tokens == cond.value.shape[0] and cond.value.shape[1] == 32
    assert schedule.step_count == 4 and vae.spatial_factor == 8 and vae.latent_channels == 16
    noise = Latents(torch.randn(1, 16, 8, 8), (1, 16, 8, 8))
    [out] = denoiser.predict([noise], [schedule.model_timestep(0)], [cond])
    stepped = schedule.step(0, -out.unsqueeze(0).squeeze(2), noise)
    assert stepped.value.shape == (1, 16, 8, 8)
    state = pipeline.request(prompt="x", width=64, height=64, steps=2, guidance=1.0, seed=3)
    assert isinstance(pipeline, StepPipeline) and supports_component_modules(pipeline)
    assert isinstance(state, StepState) and state.tokens == 2 * 16 and not state.done


def test_declared_modules_resolve_to_the_loaded_modules(
    kit: KitPaths, sampler: StepLoopSampler
) -> None:
    runner = make_runner(kit.root, sampler)
    pipeline = runner.pipeline()
    found: dict[str, list[Any]] = {}
    for group in ("_dit_modules", "_encoder_modules", "_vae_modules", "_resident_modules"):
        paths: list[str] = getattr(pipeline, group)
        found[group] = [reduce(getattr, path.split("."), pipeline) for path in paths]
        assert all(isinstance(m, nn.Module) for m in found[group])
    assert found["_dit_modules"] == [pipeline.denoiser.transformer]
    assert found["_vae_modules"] == [pipeline.vae.autoencoder]


def test_int8_placement_quantizes_the_transformer_weights(
    kit: KitPaths, sampler: StepLoopSampler
) -> None:
    import copy

    from inline_core.device.policy import Placement
    from inline_core.diffusion.placement import quantize

    runner = make_runner(kit.root, sampler)
    pipeline = runner.pipeline()
    transformer = pipeline.denoiser.transformer
    int8 = Placement("cpu", "float32", quantize="int8")
    quantized = quantize(copy.deepcopy(transformer), int8)
    linears = [m for m in quantized.modules() if isinstance(m, nn.Linear)]
    assert linears and all("Int8" in type(m.weight).__name__ for m in linears)
    plain = Placement("cpu", "float32", quantize=None)
    assert quantize(transformer, plain) is transformer
    untouched = [m for m in transformer.modules() if isinstance(m, nn.Linear)]
    assert not any("Int8" in type(m.weight).__name__ for m in untouched)
