"""Jobs sent to a split are grouped by the same step loop as in process: rank 0 runs it, and the
other ranks follow each forward it shares. Concurrent Z-Image renders on 2 gloo ranks share
forwards, each take equals the same render in process (one level: a batched forward sums in
another order), and cancelling one of them leaves the others to finish. Requests with different
LoRA stacks (loaded by file on every rank) share forwards and render what one process renders
with the same stack, and a LoRA the ranks have not seen does not restart the group."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parallel_support import at_once, group_config
from PIL import Image
from zimage_support import kit_handle, kit_lora, load_spec, render_in_process

from inline_core.engine.group import GroupPipeline
from inline_core.errors import Cancelled
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.cancel import CancelToken
from inline_core.sampling import SampleJob

# Long enough that the four overlap in rank 0's loop: they are sent within milliseconds.
RENDERS: list[dict[str, Any]] = [
    {"prompt": "a red fox", "seed": 1},
    {"prompt": "a blue bird over the sea", "seed": 2},
    {"prompt": "a cat", "seed": 3},
    {"prompt": "a lighthouse at dusk, oil on canvas", "seed": 4},
]
COMMON: dict[str, Any] = {"width": 64, "height": 64, "steps": 12, "guidance": 0.0}


pytestmark = pytest.mark.worker_group(shared="cache-dit", stack="z-image kit")


@pytest.fixture(scope="module")
def handle(kit: KitPaths) -> GroupPipeline:
    return kit_handle(kit.root)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> ZImageStepPipeline:
    return load_spec(handle.remote_spec())


@pytest.fixture(scope="module")
def sampler(cache_dit_group: ParallelSampler) -> ParallelSampler:
    return cache_dit_group


def test_concurrent_split_renders_share_forwards_and_equal_their_solo_takes(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    sampler.start(handle.remote_spec())
    jobs = [SampleJob(handle, handle.request(**COMMON, **r)) for r in RENDERS]
    outputs = at_once(sampler, jobs)
    loop = sampler.stats()["rankLoop"]
    assert loop["batchedForwards"] > 0 and loop["meanBatch"] > 1.0  # they shared forwards
    for output, render in zip(outputs, RENDERS, strict=True):
        assert isinstance(output, Image.Image), output
        expected = render_in_process(local, group_config(), None, **COMMON, **render)
        got = np.asarray(output, dtype=np.int16)
        assert int(np.abs(got - np.asarray(expected, dtype=np.int16)).max()) <= 1


def test_cancelling_one_batched_render_leaves_the_others_to_finish(
    handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    token = CancelToken()

    def cancel_at_step(step: int, count: int) -> None:
        if step == 2:
            token.cancel("cancelled by the client")

    long = {**COMMON, "steps": 40}
    jobs = [
        SampleJob(
            handle, handle.request(**long, **RENDERS[0]), cancel=token, on_step=cancel_at_step
        ),
        SampleJob(handle, handle.request(**COMMON, **RENDERS[1])),
        SampleJob(handle, handle.request(**COMMON, **RENDERS[2])),
    ]
    cancelled, *finished = at_once(sampler, jobs)
    assert isinstance(cancelled, Cancelled) and "cancelled by the client" in cancelled.message
    assert all(isinstance(output, Image.Image) for output in finished), finished
    # The group is still up, and still batches.
    again = at_once(sampler, [SampleJob(handle, handle.request(**COMMON, **r)) for r in RENDERS])
    assert all(isinstance(output, Image.Image) for output in again)


def test_split_renders_apply_each_requests_stack_and_share_forwards(
    kit: KitPaths, local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    sampler.start(handle.remote_spec())
    renders: list[dict[str, Any]] = [
        {"prompt": "a red fox", "seed": 1, "loras": (kit_lora(kit, "a", 1.0),)},
        {"prompt": "a cat", "seed": 2, "loras": (kit_lora(kit, "b", 0.7), kit_lora(kit, "a", 0.5))},
        {"prompt": "a boat", "seed": 3, "loras": ()},
    ]
    jobs = [SampleJob(handle, handle.request(**COMMON, **r)) for r in renders]
    outputs = at_once(sampler, jobs)
    loop = sampler.stats()["rankLoop"]
    assert loop["batchedForwards"] > 0  # different stacks, shared forwards
    for output, render in zip(outputs, renders, strict=True):
        assert isinstance(output, Image.Image), output
        expected = render_in_process(local, group_config(), None, **COMMON, **render)
        got = np.asarray(output, dtype=np.int16)
        assert int(np.abs(got - np.asarray(expected, dtype=np.int16)).max()) <= 1

    # A LoRA the ranks have not loaded yet, at a new strength: the same group renders it.
    launches = sampler.stats()["group"]["launches"]
    fresh = {"prompt": "a red fox", "seed": 1, "loras": (kit_lora(kit, "a-kohya", 1.0),)}
    [again] = at_once(sampler, [SampleJob(handle, handle.request(**COMMON, **fresh))])
    assert sampler.stats()["group"]["launches"] == launches
    # The kohya file holds A's weights: the same take as A at the same strength.
    assert isinstance(again, Image.Image) and isinstance(outputs[0], Image.Image)
    first = np.asarray(outputs[0], dtype=np.int16)
    assert int(np.abs(np.asarray(again, dtype=np.int16) - first).max()) <= 1


def test_cached_split_renders_decide_alike_on_every_rank_and_equal_their_solo_takes(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    """Requests with their own step cache settings (and one without) share the split's
    forwards: each rank compares its own shard of a row, the sums are all-reduced, so every
    rank reuses the same rows at the same steps (else the group's collectives would part ways),
    and each take equals the same cached render in process."""
    from inline_core.runtime.step_cache import StepCacheSettings

    sampler.start(handle.remote_spec())
    caches = [
        StepCacheSettings(threshold=0.97, warmup=2, front_blocks=1, max_consecutive=2),
        StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1, max_consecutive=3),
        None,
    ]
    # One prompt: rows of one length, so a split's whole-row comparison sees no padding.
    renders = [
        {"prompt": "a red fox", "seed": 20 + i, "step_cache": c} for i, c in enumerate(caches)
    ]
    jobs = [SampleJob(handle, handle.request(**COMMON, **r)) for r in renders]
    outputs = at_once(sampler, jobs)
    for output, render in zip(outputs, renders, strict=True):
        assert isinstance(output, Image.Image), output
        expected = render_in_process(local, group_config(), None, **COMMON, **render)
        got = np.asarray(output, dtype=np.int16)
        assert int(np.abs(got - np.asarray(expected, dtype=np.int16)).max()) <= 1
    # The cached renders reused: the first is not the uncached picture.
    plain = render_in_process(local, group_config(), None, **COMMON, prompt="a red fox", seed=20)
    first = np.asarray(outputs[0], dtype=np.int16)
    assert int(np.abs(first - np.asarray(plain, dtype=np.int16)).max()) > 1
    # Rank 0 reported what each cache did: one row a step, some of them reused.
    from inline_core.components.step import step_cache_counts

    for job, cache in zip(jobs, caches, strict=True):
        counts = step_cache_counts(job.state)
        if cache is None:
            assert counts is None
        else:
            assert counts is not None and counts["reusedSteps"] > 0, counts
            assert counts["computedSteps"] + counts["reusedSteps"] == COMMON["steps"]
