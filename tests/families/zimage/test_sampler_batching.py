"""Requests with different samplers and schedules share forwards and render what each renders
alone: every request keeps its own sampler state (history, Heun's half-step) and its own noise."""

from __future__ import annotations

from typing import Any

from zimage_harness import make_runner, max_diff, pixels

from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together

TOLERANCE = 3  # a padded batch sums in another order than a lone forward

CHOICES = [
    ("euler", "simple"),
    ("euler_ancestral", "karras"),
    ("heun", "normal"),
    ("uni_pc_bh2", "beta"),
    ("dpmpp_2m_sde", "exponential"),
    ("dpmpp_sde", "sgm_uniform"),
    ("uni_pc", "kl_optimal"),
    ("er_sde", "linear_quadratic"),
]


def test_eight_requests_with_different_samplers_share_forwards_and_match_alone(
    kit: KitPaths,
) -> None:
    sampler = StepLoopSampler()
    try:
        runner = make_runner(kit.root, sampler)
        pipeline = runner.pipeline()

        def job(index: int, name: str, schedule: str) -> SampleJob:
            request: Any = pipeline.request(
                prompt="a fox",  # one prompt, so the pictures differ by sampler and schedule
                width=64,
                height=64,
                steps=4,
                guidance=0.0,
                seed=3,
                sampler=name,
                sigma_schedule=schedule,
            )
            return SampleJob(pipeline, request)

        alone = [pixels(sampler.run(job(i, *c))) for i, c in enumerate(CHOICES)]
        before = sampler.stats()
        together = [
            pixels(out)
            for out in run_together(sampler, pipeline, [job(i, *c) for i, c in enumerate(CHOICES)])
        ]
        after = sampler.stats()
    finally:
        sampler.close()
    assert after["batchedForwards"] > before["batchedForwards"]
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert max_diff(solo, batched) <= TOLERANCE, CHOICES[i]
    for i in range(1, len(CHOICES)):  # each choice renders a picture of its own
        assert max_diff(alone[0], alone[i]) > 0, CHOICES[i]
