"""Per-request state under xDiT's split (xfuser 0.7 on 2 gloo CPU ranks, `xfuser_on_cpu`): xDiT
puts its own transformer class in place of the resident one, so each request's LoRA rows and
step cache must follow the module that runs. A LoRA render and a cached render equal the same
render in process (a new LoRA file restarts nothing); a cache that never reuses gives the
uncached take; and requests with their own stacks, caches and prompt lengths batched in one split
forward (xDiT runs sequences of another length apart, each with its own rows' state) each equal
their render alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parallel_support import at_once, group_config
from PIL import Image
from test_parallel_xfuser import LONG_NEGATIVE
from zimage_support import kit_handle, kit_lora, load_spec, render_in_process

from inline_core.components.step import step_cache_counts
from inline_core.engine.group import GroupPipeline
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.step_cache import StepCacheSettings
from inline_core.sampling import SampleJob

COMMON: dict[str, Any] = {"width": 64, "height": 64, "steps": 8, "guidance": 0.0}
CACHE = StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1, max_consecutive=3)


pytestmark = pytest.mark.worker_group(shared="xfuser")


@pytest.fixture(scope="module")
def handle(kit: KitPaths) -> GroupPipeline:
    return kit_handle(kit.root)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> ZImageStepPipeline:
    return load_spec(handle.remote_spec())


@pytest.fixture(scope="module")
def sampler(xfuser_group: ParallelSampler) -> ParallelSampler:
    return xfuser_group


def pixels(image: object) -> np.ndarray[Any, np.dtype[np.int16]]:
    assert isinstance(image, Image.Image), image
    return np.asarray(image, dtype=np.int16)


def max_diff(a: object, b: object) -> int:
    return int(np.abs(pixels(a) - pixels(b)).max())


def split(sampler: ParallelSampler, handle: GroupPipeline, **kw: Any) -> object:
    return sampler.run(SampleJob(pipeline=handle, state=handle.request(**kw)))


def test_a_lora_render_split_by_xdit_equals_the_lora_render_in_process(
    kit: KitPaths, local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    kw = {**COMMON, "prompt": "a red fox", "seed": 5}
    loras = (kit_lora(kit, "a", 1.0), kit_lora(kit, "b", 0.7))
    expected = render_in_process(local, group_config(), None, **kw, loras=loras)
    plain = render_in_process(local, group_config(), None, **kw)
    assert max_diff(expected, plain) > 8  # the stack shows in the picture
    got = split(sampler, handle, **kw, loras=loras)
    assert max_diff(got, expected) <= 1
    assert sampler.last_meta[0]["engine"] == "xfuser"
    # A file the ranks have not loaded (A's weights in kohya's naming): the same group renders
    # it, and the same picture.
    launches = sampler.stats()["group"]["launches"]
    fresh = split(sampler, handle, **kw, loras=(kit_lora(kit, "a-kohya", 1.0), loras[1]))
    assert sampler.stats()["group"]["launches"] == launches
    assert max_diff(fresh, got) <= 1


def test_a_cached_render_split_by_xdit_skips_blocks_and_equals_the_cached_render_in_process(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    kw = {**COMMON, "prompt": "a red fox", "seed": 6}
    expected = render_in_process(local, group_config(), None, **kw, step_cache=CACHE)
    plain = render_in_process(local, group_config(), None, **kw)
    assert max_diff(expected, plain) > 1  # the cache reused steps
    job = SampleJob(pipeline=handle, state=handle.request(**kw, step_cache=CACHE))
    got = sampler.run(job)
    assert max_diff(got, expected) <= 1
    counts = step_cache_counts(job.state)
    assert counts is not None and counts["reusedSteps"] > 0 and counts["skippedBlocks"] > 0
    assert counts["computedSteps"] + counts["reusedSteps"] == COMMON["steps"]
    # A threshold that never reuses computes every block: the uncached take, exactly.
    never = StepCacheSettings(threshold=0.0, warmup=1, front_blocks=1)
    again = split(sampler, handle, **kw, step_cache=never)
    assert np.array_equal(pixels(again), pixels(split(sampler, handle, **kw)))
    assert max_diff(again, plain) <= 1


def test_rows_with_their_own_stacks_caches_and_lengths_batched_by_xdit_equal_each_alone(
    kit: KitPaths, local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    sampler.start(handle.remote_spec())
    long = {"guidance": 2.5, "negative_prompt": LONG_NEGATIVE}  # rows of another length
    renders: list[dict[str, Any]] = [
        {"prompt": "a red fox", "seed": 1, "loras": (kit_lora(kit, "a", 1.0),), **long},
        {"prompt": "a cat", "seed": 2, "loras": (kit_lora(kit, "b", 0.7),), "step_cache": CACHE},
        {"prompt": "a lighthouse at dusk, oil on canvas", "seed": 3, "step_cache": CACHE, **long},
        {"prompt": "a boat", "seed": 4},
    ]
    jobs = [SampleJob(handle, handle.request(**{**COMMON, **r})) for r in renders]
    outputs = at_once(sampler, jobs)
    assert sampler.stats()["rankLoop"]["batchedForwards"] > 0  # they shared forwards
    for output, render in zip(outputs, renders, strict=True):
        expected = render_in_process(local, group_config(), None, **{**COMMON, **render})
        diff = np.abs(pixels(output) - pixels(expected))
        assert int(diff.max()) <= 1 and float(diff.mean()) < 0.01, render
    for job, render in zip(jobs, renders, strict=True):
        counts = step_cache_counts(job.state)
        assert (counts is None) == ("step_cache" not in render)
        assert counts is None or counts["reusedSteps"] > 0, counts
