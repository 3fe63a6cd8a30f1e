"""Step caching (DBCache, kept per request) on the tiny LTX-2, through the step loop and the node
(`step_cache_harness.py`).

The kit's transformer has two blocks, each taking and returning the video's and the
soundtrack's hidden states: the first is the front block (always computed), the second the
middle block (computed or reused per row, both streams together). A threshold of 0.01 compares
and never reuses (the kit's video residual moves far more than that a step), 0.9 reuses as
often as the caps allow; neither is near a residual's change, so a few ulps of batching never
flip a decision. A render is compared as levels: its frames' 8-bit levels and its sound in
levels of 1/20000 (the harness's tolerance of 2 levels is 1e-4 of the sound's full scale)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import SMALL, ltx2_rig, node_params, take_audio, take_frames

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.standalone import FamilyRig
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import NEVER, check_joined_mid_render, check_step_cache

TIGHT = StepCacheSettings(threshold=0.01, warmup=0, front_blocks=1)  # compares, never reuses
LOOSE = StepCacheSettings(threshold=0.9, warmup=2, front_blocks=1, max_consecutive=2)
OTHER = StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1, max_consecutive=1)
SOUND_LEVELS = 20_000  # levels of the sound's full scale, as compared

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


def levels(output: object) -> np.ndarray[Any, Any]:
    """A render's frames and sound as one array of levels."""
    assert isinstance(output, Video) and output.audio is not None
    sound = np.round(output.audio.samples.astype(np.float64) * SOUND_LEVELS)
    return np.concatenate([output.frames.astype(np.int64).ravel(), sound.astype(np.int64).ravel()])


def spec(seed: int, **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {**SMALL, "prompt": f"a kite number {seed}", "steps": 8}
    return {**base, "guidance": 3.0, "format": "png", "seed": seed, **values}


@pytest.mark.parametrize("loose", [LOOSE, OTHER], ids=["warmup-2", "warmup-1"])
def test_the_step_cache_per_request_on_both_streams(
    rig: FamilyRig, sampler: StepLoopSampler, loose: StepCacheSettings
) -> None:
    # Two rows a step: the prompt and the negative one.
    check_step_cache(sampler, rig.pipeline(), spec(2), levels, rows=2, loose=loose)


def test_a_tight_threshold_compares_and_never_reuses(
    rig: FamilyRig, sampler: StepLoopSampler
) -> None:
    pipeline: Any = rig.pipeline()
    plain = levels(sampler.run(SampleJob(pipeline, pipeline.request(**spec(1)))))
    state = pipeline.request(**spec(1, step_cache=TIGHT))
    assert np.array_equal(plain, levels(sampler.run(SampleJob(pipeline, state))))
    counted = state.cache.stats()
    # Both rows (the prompt and the negative one) computed both blocks at every step.
    assert counted["computedSteps"] == 16 and counted["reusedSteps"] == 0
    assert counted["skippedBlocks"] == 0 and counted["computedBlocks"] == 32


def test_a_cached_request_joined_mid_render_renders_as_it_does_alone(
    rig: FamilyRig, sampler: StepLoopSampler
) -> None:
    """The first request is cached; at its third step two more of its shape join its forwards:
    one cached with other settings and fewer steps, one not cached at all."""
    specs = [
        spec(11, step_cache=LOOSE),
        spec(12, steps=6, step_cache=OTHER, prompt="a much longer prompt, the second"),
        spec(13, steps=4, step_cache=None),
    ]
    check_joined_mid_render(sampler, rig.pipeline(), specs, levels, join_step=2)


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
