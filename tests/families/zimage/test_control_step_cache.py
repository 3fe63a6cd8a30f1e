"""Step caching on Z-Image control renders (ControlNet Union): the control model's hints are
added after the transformer's layers whether a row computes them or reuses its cached residual
(which holds the hints of the step it was computed at), so a threshold that never reuses equals
no caching to the last level, one that reuses skips and counts blocks, and cached control
requests batched with others render as alone, with the same decisions.

The kit's residuals move 0.6-1.0 (relative L1) a step, so the thresholds are high, as in the
other Z-Image step cache tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from control_harness import UNION, UNION_21, control_fields
from zimage_harness import make_runner, max_diff, pixels

from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage.kit import KitPaths
from inline_core.runtime.step_cache import StepCacheSettings
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler

STEPS = 10
TOLERANCE = 3  # a padded batch sums in another order than a lone forward (the control tests')
NEVER = StepCacheSettings(threshold=0.0, warmup=0, front_blocks=1)
LOOSE = StepCacheSettings(threshold=0.97, warmup=2, front_blocks=1, max_consecutive=2)
OTHER = StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1, max_consecutive=3)


@dataclass(frozen=True)
class Case:
    cache: StepCacheSettings | None
    control: str | None = UNION
    strength: float = 0.8
    shift: int = 0
    width: int = 64


@pytest.fixture(scope="module")
def rig(kit: KitPaths, sampler: StepLoopSampler) -> FamilyRig:
    return make_runner(kit.root, sampler)


def job(rig: FamilyRig, index: int, case: Case) -> SampleJob:
    pipeline = rig.pipeline()
    extra: dict[str, Any] = {}
    if case.control is not None:
        extra.update(control_fields(rig, case.control, case.strength, case.width, case.shift))
    request: Any = pipeline.request(
        prompt="a fox",  # one prompt: rows of one length
        width=case.width,
        height=64,
        steps=STEPS,
        guidance=0.0,
        seed=index,
        step_cache=case.cache,
        **extra,
    )
    return SampleJob(pipeline, request)


def counts(j: SampleJob) -> dict[str, int] | None:
    cache = j.state.cache
    return None if cache is None else dict(cache.stats())


def test_a_control_render_that_never_reuses_equals_no_caching_and_one_that_reuses_skips(
    rig: FamilyRig, sampler: StepLoopSampler
) -> None:
    plain = pixels(sampler.run(job(rig, 1, Case(None))))
    never = job(rig, 1, Case(NEVER))
    assert max_diff(plain, pixels(sampler.run(never))) == 0
    assert counts(never) == {
        "computedSteps": STEPS,
        "reusedSteps": 0,
        "skippedBlocks": 0,
        "computedBlocks": 2 * STEPS,
    }
    loose = job(rig, 1, Case(LOOSE))
    reused = pixels(sampler.run(loose))
    counted = counts(loose)
    assert counted is not None and counted["reusedSteps"] >= 3
    assert counted["skippedBlocks"] == counted["reusedSteps"]  # one middle block each
    assert max_diff(plain, reused) > 0
    # The hints still steer a reusing render: another control image, another picture.
    moved = pixels(sampler.run(job(rig, 1, Case(LOOSE, shift=6))))
    assert max_diff(reused, moved) > 0


def test_cached_control_requests_share_forwards_and_render_as_alone(
    rig: FamilyRig, sampler: StepLoopSampler
) -> None:
    cases = [
        Case(LOOSE),
        Case(OTHER, strength=0.3, shift=6),
        Case(LOOSE, control=UNION_21, strength=1.0),
        Case(None),  # a control request without a cache
        Case(OTHER, control=None),  # a cached request without control
        Case(LOOSE, width=96),  # another sequence length in the same forward
    ]
    alone_jobs = [job(rig, i, c) for i, c in enumerate(cases)]
    alone = [pixels(sampler.run(j)) for j in alone_jobs]
    before = sampler.stats()
    jobs = [job(rig, i, c) for i, c in enumerate(cases)]
    futures = [sampler.submit(j) for j in jobs]
    together = [pixels(f.result(timeout=300)) for f in futures]
    after = sampler.stats()
    assert after["batchedForwards"] > before["batchedForwards"]
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert max_diff(solo, batched) <= TOLERANCE, f"request {i} ({cases[i]})"
    assert [counts(j) for j in jobs] == [counts(j) for j in alone_jobs]
    assert sum((counts(j) or {}).get("reusedSteps", 0) for j in jobs) > 0
