"""Step caching (DBCache, kept per request) on the tiny LTX-2, through the step loop and the node.

The kit's transformer has two blocks, each taking and returning the video's and the
soundtrack's hidden states: the first is the front block (always computed), the second the
middle block (computed or reused per row, both streams together). A threshold of 0.01 compares
and never reuses (the kit's video residual moves far more than that a step), 0.9 reuses as
often as the caps allow; neither is near a residual's change, so a few ulps of batching never
flip a decision."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import SMALL, ltx2_rig, node_params, take_audio, take_frames

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.request import LTX2Request
from inline_core.families.standalone import FamilyRig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler

NEVER = StepCacheSettings(threshold=0.0, warmup=0, front_blocks=1)
TIGHT = StepCacheSettings(threshold=0.01, warmup=0, front_blocks=1)  # compares, never reuses
LOOSE = StepCacheSettings(threshold=0.9, warmup=2, front_blocks=1, max_consecutive=2)
OTHER = StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1, max_consecutive=1)
TOLERANCE = 2  # levels of 255: a batch of more rows is blocked otherwise by the CPU's kernels
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
AUDIO_TOLERANCE = 1e-4

_ids = itertools.count()


@pytest.fixture(scope="module")
def sampler() -> Iterator[StepLoopSampler]:
    # Phases on the loop: a request submitted between two forwards is in the next one.
    s = StepLoopSampler(phases="loop", token_budget=8192)  # three requests of 1536 tokens
    yield s
    s.close()


@pytest.fixture(scope="module")
def rig(ltx2_kit: LTX2Kit, sampler: StepLoopSampler) -> FamilyRig:
    return ltx2_rig(ltx2_kit.root, sampler)


def request(pipeline: Any, seed: int, cache: StepCacheSettings | None, **spec: Any) -> LTX2Request:
    values: dict[str, Any] = {**SMALL, "prompt": f"a kite number {seed}", "steps": 8}
    values.update(guidance=3.0, format="png", seed=seed, step_cache=cache, **spec)
    state: LTX2Request = pipeline.request(**values)
    return state


def render(rig: FamilyRig, state: LTX2Request) -> Video:
    out = rig.runtime.sampler.run(SampleJob(rig.pipeline(), state))
    assert isinstance(out, Video) and out.audio is not None
    return out


def stats(state: LTX2Request) -> dict[str, int]:
    assert state.cache is not None
    counted: dict[str, int] = state.cache.stats()
    return counted


def differences(a: Video, b: Video) -> tuple[int, float, float]:
    """The frames' largest difference in levels, the share of values differing, and the
    sound's largest difference."""
    frames = np.abs(a.frames.astype(np.int16) - b.frames.astype(np.int16))
    assert a.audio is not None and b.audio is not None
    sound = float(np.abs(a.audio.samples - b.audio.samples).max())
    return int(frames.max()), float((frames > 0).mean()), sound


@pytest.mark.parametrize("never", [NEVER, TIGHT], ids=["threshold-0", "threshold-0.01"])
def test_a_threshold_that_never_reuses_equals_no_caching(
    rig: FamilyRig, never: StepCacheSettings
) -> None:
    pipeline = rig.pipeline()
    plain = render(rig, request(pipeline, 1, None))
    state = request(pipeline, 1, never)
    cached = render(rig, state)
    assert np.array_equal(plain.frames, cached.frames)
    assert plain.audio is not None and cached.audio is not None
    assert np.array_equal(plain.audio.samples, cached.audio.samples)
    # Both rows (the prompt and the negative one) computed both blocks at every step.
    assert stats(state)["computedSteps"] == 16 and stats(state)["reusedSteps"] == 0
    assert stats(state)["skippedBlocks"] == 0 and stats(state)["computedBlocks"] == 32


def test_a_threshold_that_reuses_skips_both_streams_middle_blocks_and_counts_them(
    rig: FamilyRig,
) -> None:
    pipeline = rig.pipeline()
    plain = render(rig, request(pipeline, 2, None))
    state = request(pipeline, 2, LOOSE)
    cached = render(rig, state)
    counted = stats(state)
    assert counted["computedSteps"] + counted["reusedSteps"] == 16  # two rows, eight steps
    # Per row: two warmup steps computed, then two reuses (the cap) after each computed step:
    # steps 2, 3, 5 and 6 reuse.
    assert counted["reusedSteps"] == 2 * 4
    assert counted["skippedBlocks"] == counted["reusedSteps"]  # one middle block a reuse
    assert counted["computedBlocks"] == 2 * 16 - counted["skippedBlocks"]
    frames, _share, sound = differences(plain, cached)
    assert frames > 0 and sound > 0  # an approximation of both streams: not the same


def test_a_cached_request_batched_with_others_renders_as_it_does_alone(
    rig: FamilyRig, sampler: StepLoopSampler
) -> None:
    """The first request is cached; at its third step two more of its shape join its forwards:
    one cached with other settings and fewer steps, one not cached at all. Every row decides on
    its own, so each renders what it renders alone, with the same decisions."""
    pipeline: Any = rig.pipeline()
    specs: list[tuple[int, StepCacheSettings | None, dict[str, Any]]] = [
        (11, LOOSE, {"steps": 8}),
        (12, OTHER, {"steps": 6, "prompt": "a much longer prompt, the second"}),
        (13, None, {"steps": 4}),
    ]
    alone: list[Video] = []
    alone_stats: list[dict[str, int] | None] = []
    for seed, cache, spec in specs:
        state = request(pipeline, seed, cache, **spec)
        alone.append(render(rig, state))
        alone_stats.append(None if cache is None else stats(state))

    states = [request(pipeline, seed, cache, **spec) for seed, cache, spec in specs]
    arrived: list[Future[Any]] = []
    batches: list[tuple[int, ...]] = []
    forward = pipeline.denoise_step
    lock = threading.Lock()

    def watched(batch: Sequence[LTX2Request], /) -> Any:
        with lock:
            batches.append(tuple(s.seed for s in batch))
            if not arrived and batch[0].seed == 11 and batch[0].step_index == 2:
                arrived.extend(sampler.submit(SampleJob(pipeline, s)) for s in states[1:])
        return forward(batch)

    pipeline.denoise_step = watched
    try:
        first = sampler.run(SampleJob(pipeline, states[0]))
        together = [first, *(f.result(timeout=120) for f in arrived)]
    finally:
        del pipeline.denoise_step

    assert (11, 12, 13) in batches  # they shared forwards, at different steps
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        frames, share, sound = differences(solo, batched)
        assert frames <= TOLERANCE and share <= MAX_DIFFERING, f"request {i}"
        assert sound <= AUDIO_TOLERANCE, f"request {i}"
    assert [None if s.cache is None else stats(s) for s in states] == alone_stats
    assert alone_stats[0] is not None and alone_stats[0]["reusedSteps"] > 0
    assert alone_stats[1] is not None and alone_stats[1]["reusedSteps"] > 0


def node_render(rig: FamilyRig, takes: Path, choice: StepCacheChoice, **params: Any) -> NodeResult:
    ctx = ExecutionContext(
        run_id=f"ltx2-cache{next(_ids)}", takes=FileTakeStore(takes), step_cache=choice
    )
    inputs = {"prompt": "a kite"}
    call = NodeCall(ctx=ctx, node_id="l", params=node_params(**params), inputs=inputs)
    return rig.run(call)


def test_the_node_caches_as_asked_and_its_take_records_it(rig: FamilyRig, tmp_path: Path) -> None:
    asked = node_render(rig, tmp_path, StepCacheChoice(True, NEVER), steps=4, guidance=3.0)
    plain = node_render(rig, tmp_path, StepCacheChoice(True, None), steps=4, guidance=3.0)
    assert asked.takes[0].params["cache"]["method"] == "dbcache"
    assert asked.takes[0].params["cache"]["threshold"] == 0.0
    assert asked.takes[0].params["cacheCounts"]["computedSteps"] == 8
    assert "cache" not in plain.takes[0].params
    assert np.array_equal(take_frames(asked), take_frames(plain))
    assert np.array_equal(take_audio(asked).samples, take_audio(plain).samples)
