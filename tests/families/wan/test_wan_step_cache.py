"""Step caching (DBCache, kept per request) on the real tiny Wan, through the step loop and the
node.

The kit's transformer has two blocks: the first is its front block (always computed), the second
its middle block (computed or reused per row). Its random weights move the front residual by
0.05-0.12 (relative L1) from step to step, so 0.01 compares and never reuses, and 0.3 or 0.5
reuse as often as their caps allow; no threshold here is near a residual's change, so a few ulps
of batching never flip a decision."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from wan_harness import PROMPT, node_params, take_frames, wan_rig

from inline_core.families.standalone import FamilyRig
from inline_core.families.wan.kit import WanKit
from inline_core.families.wan.request import WanRequest
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import check_joined_mid_render

NEVER = StepCacheSettings(threshold=0.0, warmup=0, front_blocks=1)
TIGHT = StepCacheSettings(threshold=0.01, warmup=0, front_blocks=1)  # compares, never reuses
LOOSE = StepCacheSettings(threshold=0.5, warmup=2, front_blocks=1, max_consecutive=2)
OTHER = StepCacheSettings(threshold=0.3, warmup=1, front_blocks=1, max_consecutive=1)
SHAPE: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "format": "png"}

_ids = itertools.count()


@pytest.fixture(scope="module")
def sampler() -> Iterator[StepLoopSampler]:
    # Phases on the loop: a request submitted between two forwards is in the next one.
    s = StepLoopSampler(phases="loop")
    yield s
    s.close()


@pytest.fixture(scope="module")
def rig(wan_kit: WanKit, sampler: StepLoopSampler) -> FamilyRig:
    return wan_rig(wan_kit.root, sampler)


def spec(seed: int, cache: StepCacheSettings | None) -> dict[str, Any]:
    values: dict[str, Any] = {"prompt": f"a kite number {seed}", "steps": 12, "guidance": 3.0}
    return {**SHAPE, **values, "seed": seed, "step_cache": cache}


def request(pipeline: Any, seed: int, cache: StepCacheSettings | None, **more: Any) -> WanRequest:
    state: WanRequest = pipeline.request(**{**spec(seed, cache), **more})
    return state


def frames(output: object) -> np.ndarray[Any, Any]:
    assert isinstance(output, Video)
    return output.frames.astype(np.int16)


def render(rig: FamilyRig, state: WanRequest) -> np.ndarray[Any, Any]:
    return frames(rig.runtime.sampler.run(SampleJob(rig.pipeline(), state)))


def stats(state: WanRequest) -> dict[str, int]:
    assert state.cache is not None
    counted: dict[str, int] = state.cache.stats()
    return counted


@pytest.mark.parametrize("never", [NEVER, TIGHT], ids=["threshold-0", "threshold-0.01"])
def test_a_threshold_that_never_reuses_equals_no_caching_to_the_last_level(
    rig: FamilyRig, never: StepCacheSettings
) -> None:
    pipeline = rig.pipeline()
    plain = render(rig, request(pipeline, 1, None))
    state = request(pipeline, 1, never)
    assert int(np.abs(plain - render(rig, state)).max()) == 0
    # Both rows (the prompt and the negative one) computed both blocks at every step.
    assert stats(state)["computedSteps"] == 24 and stats(state)["reusedSteps"] == 0
    assert stats(state)["skippedBlocks"] == 0 and stats(state)["computedBlocks"] == 48


def test_a_threshold_that_reuses_skips_blocks_and_counts_them(rig: FamilyRig) -> None:
    pipeline = rig.pipeline()
    plain = render(rig, request(pipeline, 2, None))
    state = request(pipeline, 2, LOOSE)
    cached = render(rig, state)
    counted = stats(state)
    assert counted["computedSteps"] + counted["reusedSteps"] == 24  # two rows, twelve steps
    # Per row: two warmup steps computed, then two reuses (the cap) after each computed step:
    # steps 2, 3, 5, 6, 8, 9 and 11 reuse.
    assert counted["reusedSteps"] == 2 * 7
    # One middle block skipped per reused step; the front block always runs.
    assert counted["skippedBlocks"] == counted["reusedSteps"]
    assert counted["computedBlocks"] == 2 * 24 - counted["skippedBlocks"]
    assert int(np.abs(plain - cached).max()) > 0  # an approximation: not the same frames


def test_a_cached_request_batched_with_others_renders_as_it_does_alone(
    rig: FamilyRig, sampler: StepLoopSampler
) -> None:
    """The first request is cached; at its fourth step two more of its shape join its forwards:
    one cached with other settings and fewer steps, one not cached at all."""
    specs = [
        {**spec(11, LOOSE), "steps": 12},
        {**spec(12, OTHER), "steps": 8, "prompt": "a much longer prompt for the second request"},
        {**spec(13, None), "steps": 6},
    ]
    check_joined_mid_render(sampler, rig.pipeline(), specs, frames, join_step=3)


def node_render(rig: FamilyRig, takes: Path, choice: StepCacheChoice, **params: Any) -> NodeResult:
    ctx = ExecutionContext(
        run_id=f"wan-cache{next(_ids)}", takes=FileTakeStore(takes), step_cache=choice
    )
    call = NodeCall(ctx=ctx, node_id="w", params=node_params(**params), inputs={"prompt": PROMPT})
    return rig.run(call)


def test_the_node_caches_from_20_steps_and_its_take_records_it(
    rig: FamilyRig, tmp_path: Path
) -> None:
    few = node_render(rig, tmp_path, StepCacheChoice(), steps=8)
    assert "cache" not in few.takes[0].params  # few steps: the policy leaves it off
    many = node_render(rig, tmp_path, StepCacheChoice(), steps=20)
    assert many.takes[0].params["cache"]["method"] == "dbcache"
    assert many.takes[0].params["cache"]["threshold"] == StepCacheSettings().threshold
    off = node_render(rig, tmp_path, StepCacheChoice(True, None), steps=20)
    assert "cache" not in off.takes[0].params  # {"method": "none"} wins over the policy
    asked = node_render(rig, tmp_path, StepCacheChoice(True, NEVER), steps=6)
    plain = node_render(rig, tmp_path, StepCacheChoice(True, None), steps=6)
    assert asked.takes[0].params["cache"]["threshold"] == 0.0
    assert np.array_equal(take_frames(asked), take_frames(plain))


def test_cached_requests_with_their_own_loras_share_forwards_and_render_as_alone(
    rig: FamilyRig, wan_kit: WanKit
) -> None:
    """Rows that compute their middle block run it as a sub-batch, and each keeps its own LoRA
    stack there (the per-row plan narrowed to the sub-batch)."""
    from test_wan_batching import assert_same, solo_and_together

    from tests.families.zimage.lora_harness import Stack, picks

    specs: list[tuple[Stack, StepCacheSettings | None]] = [
        ([("a", 1.0)], LOOSE),
        ([("b", 1.0)], OTHER),
        ([("a", 0.5), ("b", 1.5)], None),
        ([], LOOSE),
    ]
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline()
        requests = [
            {
                **SHAPE,
                "prompt": f"render {i}",
                "seed": i,
                "steps": 8,
                "guidance": 3.0,
                "loras": tuple(h.use for h in picks(rig, wan_kit, stack)),
                "step_cache": cache,
            }
            for i, (stack, cache) in enumerate(specs)
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0, stats
    assert_same(solo, together)


A14B_HIGH = "wan2.2_t2v_high_noise_tiny_fp32.safetensors"
PAIR: dict[str, Any] = {"steps": 8, "shift": 12.0, "boundary_ratio": 0.875}


def test_an_a14b_pair_caches_both_experts_and_never_reusing_equals_no_cache(
    rig: FamilyRig,
) -> None:
    """Each expert caches its own steps (both count them): a request crossing the switch
    renders the uncached frames when its threshold never reuses."""
    pipeline = rig.pipeline(A14B_HIGH)
    run = rig.runtime.sampler.run
    plain = frames(run(SampleJob(pipeline, request(pipeline, 21, None, **PAIR))))
    state = request(pipeline, 21, TIGHT, **PAIR)
    assert int(np.abs(plain - frames(run(SampleJob(pipeline, state)))).max()) == 0
    assert state.switch_call is not None and 1 < state.switch_call < 7  # UniPC: a call a step
    counted = stats(state)
    # Two rows (guidance), two blocks each, computed at all eight steps of the two experts.
    assert counted["computedSteps"] == 2 * 8 and counted["reusedSteps"] == 0
    assert counted["computedBlocks"] == 2 * 2 * 8 and counted["skippedBlocks"] == 0


def test_an_a14b_pair_reuses_on_both_experts_each_from_its_own_residuals(
    rig: FamilyRig,
) -> None:
    """A threshold that reuses whenever it may: each row reuses on the high-noise expert past
    its warmup, computes its first step on the low-noise one (the residuals it holds are the
    other expert's), then reuses there too; every skip is counted."""
    pipeline: Any = rig.pipeline(A14B_HIGH)
    state = request(pipeline, 22, LOOSE, **PAIR)
    reused = {0: 0, 1: 0}  # reused row-steps by expert
    forward = pipeline.denoise_step

    def watched(batch: Sequence[WanRequest], /) -> Any:
        expert, before = batch[0].expert, stats(batch[0])["reusedSteps"]
        out = forward(batch)
        reused[expert] += stats(batch[0])["reusedSteps"] - before
        return out

    pipeline.denoise_step = watched
    try:
        cached = frames(rig.runtime.sampler.run(SampleJob(pipeline, state)))
    finally:
        del pipeline.denoise_step
    switch = cast(int, state.switch_call)
    # Step 5 reused once: were the rows to keep their residuals, step 6 could reuse too.
    assert switch == 6
    # LOOSE: two warmup steps, then at most two reuses after each computed step.
    high = [s for s in range(switch) if s >= 2 and (s - 2) % 3 < 2]
    low = [s for s in range(switch, 8) if (s - switch) % 3 > 0]
    assert reused == {0: 2 * len(high), 1: 2 * len(low)}
    assert reused[0] > 0 and reused[1] > 0
    counted = stats(state)
    assert counted["reusedSteps"] == reused[0] + reused[1] == counted["skippedBlocks"]
    assert counted["computedBlocks"] == 2 * 2 * 8 - counted["skippedBlocks"]
    plain = frames(
        rig.runtime.sampler.run(SampleJob(pipeline, request(pipeline, 22, None, **PAIR)))
    )
    assert int(np.abs(plain - cached).max()) > 0  # an approximation: not the same frames
