"""CFG++ samplers on Z-Image: its step hands the sampler the unconditional prediction beside the
guided one, so `euler_cfg_pp` renders the library's (ComfyUI's) formula step by step on the tiny
model, and the `sample` node runs every CFG++ sampler where cfg guides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import torch
from primitive_graphs import Rig, make_rig, primitive_graph, take_pixels
from zimage_harness import make_runner, max_diff, pixels

from inline_core.errors import InvalidRequest
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together

GUIDANCE = 2.0  # Z-Image's scale: ComfyUI's cfg 3


def guided_request(pipeline: Any, **settings: Any) -> Any:
    """One small guided render's request, with `settings` (its sampler, shift, mu)."""
    return pipeline.request(
        prompt="a fox",
        negative_prompt="blurry",
        width=64,
        height=64,
        steps=4,
        guidance=GUIDANCE,
        seed=3,
        **settings,
    )


def render(pipeline: Any, sampler: str) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """The final latents of one guided render driven step by step; its noise and sigmas."""
    state: Any = guided_request(pipeline, sampler=sampler)
    pipeline.prepare_encode(state)
    noise = state.latents.value.clone()
    sigmas = list(state.schedule.stepper.sigmas)
    while not state.done:
        pipeline.step_scheduler(state, pipeline.denoise_step([state])[0])
    return state.latents.value.clone(), noise, sigmas


def test_euler_cfg_pp_renders_comfyuis_formula(
    kit: KitPaths, sampler: StepLoopSampler, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = make_runner(kit.root, sampler).pipeline()
    calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (x, positive, negative)
    predict = pipeline.denoiser.predict

    def recorded(latents: Any, *args: Any, **kwargs: Any) -> list[torch.Tensor]:
        out = cast(list[torch.Tensor], predict(latents, *args, **kwargs))
        calls.append((latents[0].value.clone(), out[0].clone(), out[1].clone()))
        return out

    monkeypatch.setattr(pipeline.denoiser, "predict", recorded)
    final, x, sigmas = render(pipeline, "euler_cfg_pp")
    assert len(calls) == len(sigmas) - 1
    for (seen, pos, neg), sigma, sigma_next in zip(calls, sigmas, sigmas[1:], strict=False):
        assert torch.equal(seen, x)  # the model saw the formula's point
        # Z-Image predicts `x0 - noise` (its velocity negated), guided as `pos + g (pos - neg)`.
        guided = -(pos + GUIDANCE * (pos - neg)).unsqueeze(0).squeeze(2)
        uncond = -neg.unsqueeze(0).squeeze(2)
        denoised, uncond_denoised = x - sigma * guided, x - sigma * uncond
        # ComfyUI's euler_cfg_pp on a flow model (ancestral CFG++ at eta 0): land on the guided
        # estimate, renoise along the unconditional one.
        to_noise = (x - (1 - sigma) * uncond_denoised) / sigma
        x = denoised if sigma_next == 0 else (1 - sigma_next) * denoised + sigma_next * to_noise
    assert torch.allclose(final, x, atol=1e-5), (final - x).abs().max()
    monkeypatch.undo()
    plain, _noise, _sigmas = render(pipeline, "euler")
    assert (plain - final).abs().max() > 1e-3  # the unconditional prediction was used


@pytest.fixture
def rig(kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path) -> Rig:
    return make_rig(kit.root, sampler, tmp_path)


@pytest.mark.parametrize("name", CFG_PP_SAMPLERS)
def test_sample_runs_every_cfg_pp_sampler(rig: Rig, name: str) -> None:
    guided = primitive_graph("a fox", cfg=3.0, negative="blurry", sampler=name)
    [take] = rig.run(guided)[0].takes
    assert take.params["sampler"] == name
    base = primitive_graph(
        "a fox", cfg=3.0, negative="blurry", sampler=name.removesuffix("_cfg_pp")
    )
    [plain] = rig.run(base)[0].takes
    assert max_diff(take_pixels(take), take_pixels(plain)) > 0


def test_cfg_pp_without_guidance_is_refused(rig: Rig) -> None:
    with pytest.raises(InvalidRequest, match="set cfg above 1"):
        rig.run(primitive_graph("a fox", sampler="euler_cfg_pp"))


MIXED: list[dict[str, Any]] = [
    {"sampler": "euler"},
    {"sampler": "euler_cfg_pp"},
    {"sampler": "dpmpp_2m_cfg_pp", "shift": 6.0},
    {"sampler": "euler_ancestral_cfg_pp", "mu": 1.5},
]


def test_cfg_pp_requests_share_forwards_and_match_alone(kit: KitPaths) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = make_runner(kit.root, sampler).pipeline()

        def job(settings: dict[str, Any]) -> SampleJob:
            return SampleJob(pipeline, guided_request(pipeline, **settings))

        alone = [pixels(sampler.run(job(s))) for s in MIXED]
        before = sampler.stats()
        together = [pixels(o) for o in run_together(sampler, pipeline, [job(s) for s in MIXED])]
        after = sampler.stats()
    finally:
        sampler.close()
    assert after["batchedForwards"] > before["batchedForwards"]
    for settings, solo, batched in zip(MIXED, alone, together, strict=True):
        assert max_diff(solo, batched) <= 3, settings  # a padded batch sums in another order
