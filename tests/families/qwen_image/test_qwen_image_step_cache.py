"""Step caching (DBCache, kept per request) on the tiny Qwen-Image, through the node and the step
loop. Its blocks are dual-stream: each updates the prompt's tokens and the image's and returns
both, so a reused row adds the middle residual of each stream.

The kit's transformer has two blocks: the first is the front block (always computed), the second
the middle one (computed or reused per row). Its random weights move the front residual by far
more than 0.01 from step to step and far less than 100 (relative L1), so 0.01 compares and never
reuses and 100 reuses as often as the caps allow: no threshold here is near a residual's change,
so a few ulps of batching never flip a decision."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qwen_harness import (
    EDIT_2511_MODEL,
    EDIT_MODEL,
    PROMPT,
    TEXT_MODEL,
    max_diff,
    node_params,
    pixels,
    qwen_rig,
    small_references,
    source_image,
    take_pixels,
)

from inline_core.families.qwen_image.kit import KitPaths
from inline_core.families.standalone import FamilyRig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import all_in_loop
from tests.families.zimage.lora_harness import Stack, picks
from tests.server.server_support import wait_until

TIGHT = StepCacheSettings(threshold=0.01, warmup=0, front_blocks=1)  # compares, never reuses
LOOSE = StepCacheSettings(threshold=100.0, warmup=2, front_blocks=1, max_consecutive=2)
OTHER = StepCacheSettings(threshold=100.0, warmup=1, front_blocks=1, max_consecutive=1)
TOLERANCE = 1  # levels of 255: rows padded to a longer prompt run under a mask
_ids = itertools.count()


@pytest.fixture(scope="module")
def rig(qwen_kit: KitPaths, qwen_sampler: StepLoopSampler) -> FamilyRig:
    return qwen_rig(qwen_kit.root, qwen_sampler)


def render(
    rig: FamilyRig, takes: Path, cache: StepCacheChoice, *, inputs: dict[str, Any], **params: Any
) -> NodeResult:
    ctx = ExecutionContext(
        run_id=f"qwen-cache{next(_ids)}", takes=FileTakeStore(takes), step_cache=cache
    )
    params = {"model": TEXT_MODEL, **params}
    call = NodeCall(ctx=ctx, node_id="q", params=node_params(**params), inputs=inputs)
    return rig.run(call)


def prompt() -> dict[str, Any]:
    return {"prompt": PROMPT}


def test_the_family_caches_from_20_steps_and_the_take_records_it(
    rig: FamilyRig, tmp_path: Path
) -> None:
    assert rig.family.describe()["stepCache"] == ["dbcache"]
    short = render(rig, tmp_path, StepCacheChoice(), inputs=prompt(), steps=8)
    assert "cache" not in short.takes[0].params  # the policy: off below 20 steps
    long = render(rig, tmp_path, StepCacheChoice(), inputs=prompt(), steps=20)
    assert long.takes[0].params["cache"] == StepCacheSettings().to_json()
    off = render(rig, tmp_path, StepCacheChoice(True, None), inputs=prompt(), steps=20)
    assert "cache" not in off.takes[0].params  # {"method": "none"} wins over the policy


@pytest.mark.parametrize("guidance", [1.0, 3.0])
def test_never_reusing_equals_no_cache_and_reusing_skips_the_middle_block(
    rig: FamilyRig, tmp_path: Path, guidance: float
) -> None:
    params: dict[str, Any] = {"steps": 6, "guidance": guidance, "negative_prompt": "grey"}
    plain = render(rig, tmp_path, StepCacheChoice(True, None), inputs=prompt(), **params)
    tight = render(rig, tmp_path, StepCacheChoice(True, TIGHT), inputs=prompt(), **params)
    rows = 2 if guidance > 1 else 1  # a guided request's negative row caches on its own
    assert tight.takes[0].params["cacheCounts"] == {
        "computedSteps": 6 * rows,
        "reusedSteps": 0,
        "skippedBlocks": 0,
        "computedBlocks": 12 * rows,
    }
    assert np.array_equal(take_pixels(plain), take_pixels(tight))
    loose = render(rig, tmp_path, StepCacheChoice(True, LOOSE), inputs=prompt(), **params)
    counts = loose.takes[0].params["cacheCounts"]
    # Warmup 2, then at most 2 reused in a row: steps 3, 4 and 6 reuse, on each row.
    assert counts["reusedSteps"] == 3 * rows and counts["skippedBlocks"] == 3 * rows
    cached = take_pixels(loose)
    assert 0 < max_diff(cached, take_pixels(plain))
    assert cached.std() > 1.0


@pytest.mark.parametrize("model", [EDIT_MODEL, EDIT_2511_MODEL], ids=["2509", "2511"])
def test_an_edit_caches_with_its_references(
    qwen_kit: KitPaths, qwen_sampler: StepLoopSampler, tmp_path: Path, monkeypatch: Any, model: str
) -> None:
    """The references' tokens ride in the image stream after the output's: they are cached
    with it (Edit 2511's too, modulated at timestep zero: its timestep embedding stacks the
    references' rows after the image's, and its modulation index marks their tokens)."""
    small_references(monkeypatch)
    rig = qwen_rig(qwen_kit.root, qwen_sampler)
    inputs = {"prompt": "make it blue", "image": source_image(64, 64)}
    params: dict[str, Any] = {"model": model, "steps": 5, "guidance": 2.0}
    plain = render(rig, tmp_path, StepCacheChoice(True, None), inputs=inputs, **params)
    tight = render(rig, tmp_path, StepCacheChoice(True, TIGHT), inputs=inputs, **params)
    assert np.array_equal(take_pixels(plain), take_pixels(tight))
    loose = render(rig, tmp_path, StepCacheChoice(True, LOOSE), inputs=inputs, **params)
    assert loose.takes[0].params["cacheCounts"]["reusedSteps"] == 2 * 2  # steps 3 and 4
    assert 0 < max_diff(take_pixels(loose), take_pixels(plain))


def test_cached_requests_share_forwards_with_others_and_render_as_alone(
    qwen_kit: KitPaths,
) -> None:
    """Prompts of different lengths (the prompt stream padded under a mask: each row caches its
    real tokens), guided and not, cached with their own settings or not, each with its own LoRA
    stack: the rows that compute their middle block run it as a sub-batch, and every request
    renders and counts what it does alone."""
    specs: list[tuple[Stack, StepCacheSettings | None, float]] = [
        ([("a", 1.0)], LOOSE, 3.0),
        ([], OTHER, 3.0),
        ([("b", 0.8)], None, 3.0),
        ([], LOOSE, 1.0),
        ([("a-kohya", 0.5)], TIGHT, 1.0),
    ]
    sampler = StepLoopSampler()
    try:
        rig = qwen_rig(qwen_kit.root, sampler)
        pipeline: Any = rig.pipeline(TEXT_MODEL)

        def state(i: int) -> Any:
            stack, cache, guidance = specs[i]
            return pipeline.request(
                prompt="word " * (1 + 4 * i),
                width=64,
                height=64,
                steps=7,
                guidance=guidance,
                seed=i,
                loras=tuple(h.use for h in picks(rig, qwen_kit, stack)),
                step_cache=cache,
            )

        alone_then_together(sampler, pipeline, state, len(specs))
    finally:
        sampler.close()


def test_cached_2511_edits_share_forwards_and_render_as_alone(
    qwen_kit: KitPaths, monkeypatch: Any
) -> None:
    """Edit 2511 requests (references of one size, prompts of different lengths, guided and
    not) cached with their own settings or not: the rows that compute their middle block run it
    as a sub-batch, with their own rows of the stacked timestep embedding and the modulation
    index, and every request renders and counts what it does alone."""
    small_references(monkeypatch)
    specs: list[tuple[StepCacheSettings | None, float]] = [
        (LOOSE, 3.0),
        (OTHER, 3.0),
        (None, 3.0),
        (LOOSE, 1.0),
        (TIGHT, 1.0),
    ]
    sampler = StepLoopSampler()
    try:
        rig = qwen_rig(qwen_kit.root, sampler)
        pipeline: Any = rig.pipeline(EDIT_2511_MODEL)

        def state(i: int) -> Any:
            cache, guidance = specs[i]
            return pipeline.request(
                prompt="word " * (1 + 3 * i),
                images=(source_image(64, 64, seed=i),),
                width=64,
                height=64,
                steps=7,
                guidance=guidance,
                seed=i,
                step_cache=cache,
            )

        alone_then_together(sampler, pipeline, state, len(specs))
    finally:
        sampler.close()


def alone_then_together(
    sampler: StepLoopSampler, pipeline: Any, state: Callable[[int], Any], count: int
) -> None:
    """Requests `state(0..count-1)` rendered alone, then all at once (held at a step boundary
    until every one is in the loop): each renders and counts as alone. Guided and unguided rows
    form two groups, each sharing all 7 of its steps."""
    alone_states = [state(i) for i in range(count)]
    alone = [pixels(sampler.run(SampleJob(pipeline, s))) for s in alone_states]
    assert sampler.stats()["batchedForwards"] == 0
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:  # the loop waits at a boundary until every job is in it
        holding.set()
        release.wait(300)

    sampler.call_soon(hold)
    assert holding.wait(60), "the step loop did not take the call"
    states = [state(i) for i in range(count)]
    try:
        futures = [sampler.submit(SampleJob(pipeline, s)) for s in states]
        wait_until(lambda: all_in_loop(sampler, count), "all of them in the loop")
    finally:
        release.set()
    together = [pixels(f.result(timeout=300)) for f in futures]
    assert sampler.stats()["batchedForwards"] == 14, sampler.stats()
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert max_diff(solo, batched) <= TOLERANCE, f"request {i}"
    for solo_state, batched_state in zip(alone_states, states, strict=True):
        if solo_state.cache is not None:
            assert solo_state.cache.stats() == batched_state.cache.stats()
    assert sum(s.cache.stats()["reusedSteps"] for s in states if s.cache is not None) > 0
