"""A flow image family's split take held to its in-process take (Ulysses, Ring, both; two or four
gloo ranks), and a rank's refusal of image tokens it cannot share: one harness for FLUX.2 and
Krea 2 (each family's own harness names its renders and how its attention layers shard).

Tolerance, as the split tests of FLUX.2 and Qwen-Image: at most one level (of 255), on at most
0.1% of the values (each rank's matmuls run over its share of the tokens; oneDNN's blocking, hence
the order of its float sums, follows the shapes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PIL import Image

from inline_core.device.split import ParallelSpec
from inline_core.engine.group import GroupPipeline
from inline_core.errors import InvalidRequest
from inline_core.parallel.errors import RemoteJobError
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob, StepLoopSampler
from tests.parallel.parallel_support import split_group_config
from tests.worker_groups import shared_sampler

TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values
# Qwen-Image's shared Ring groups (`tests/worker_groups.py`), by key: a group's split is its ranks'
# launch setting, and its ranks load another family's stack in place of the last one, so the
# other families' Ring tests render on them and start no group of their own.
RING_ALONE, USP = "qwen-ring-alone", "qwen-ring"
RING_SPLITS = {
    RING_ALONE: ParallelSpec.parse("ring=2"),
    USP: ParallelSpec.parse("ulysses=2,ring=2"),
}
# Each rank's attention tokens in a layer, from the whole layer's (as one process saw them in its
# first forward) and the split's ranks.
Shares = Callable[[list[int], int], list[int]]


def ring_group(request: pytest.FixtureRequest, key: str) -> ParallelSampler:
    """The shared Ring group `key` (a module on it is marked `worker_group(shared=key)`)."""

    def make() -> ParallelSampler:
        return ParallelSampler(split_group_config(RING_SPLITS[key], DEFAULT_RUNNER), retries=1)

    return shared_sampler(request, key, make)


def alone(pipeline: Any, request: dict[str, Any]) -> tuple[Image.Image, list[int], Any]:
    """The in-process take of `request`, the tokens each attention layer saw in its first
    forward, and the request's state."""
    probe = AttentionProbe(pipeline.transformer)
    loop = StepLoopSampler()
    state = pipeline.request(**request)
    try:
        image = loop.run(SampleJob(pipeline, state))
    finally:
        loop.close()
        probe.remove()
    assert isinstance(image, Image.Image)
    return image, list(probe.first_forward), state


def assert_close(got: object, expected: Image.Image, size: tuple[int, int]) -> None:
    assert isinstance(got, Image.Image), got
    assert got.size == expected.size == size
    difference = np.abs(np.asarray(got, np.int16) - np.asarray(expected, np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING


def even_shares(whole: list[int], ranks: int) -> list[int]:
    """Every attention layer sharded evenly over the ranks (FLUX.2's blocks)."""
    assert whole and all(n % ranks == 0 for n in whole)
    return [n // ranks for n in whole]


def assert_split_equals_alone(
    local: Any,
    handle: GroupPipeline,
    group: ParallelSampler,
    request: dict[str, Any],
    shares: Shares = even_shares,
) -> None:
    """The split's take of `request` equals the in-process take, every rank ran on cache-dit and
    its attention saw its `shares` of the tokens; under the step cache, every rank decided as the
    one process did."""
    expected, whole, state = alone(local, request)
    remote = handle.request(**request)
    got = group.run(SampleJob(handle, remote))
    assert_close(got, expected, (request["width"], request["height"]))
    assert_split_shares(group, whole, shares)
    if "step_cache" in request:
        assert state.cache.stats()["reusedSteps"] > 0
        assert remote.cache.stats() == state.cache.stats()


def assert_split_shares(group: ParallelSampler, whole: list[int], shares: Shares) -> None:
    """Each rank of the group's last job ran on cache-dit, and its attention saw its `shares` of
    the tokens each layer saw `whole` in one process."""
    ranks = group.config.ranks.split.world_size
    mine = shares(whole, ranks)
    for rank in range(ranks):
        assert group.last_meta[rank]["engine"] == "cache-dit"
        assert group.last_meta[rank]["attentionTokens"] == mine


def assert_ranks_refuse(
    handle: GroupPipeline,
    group: ParallelSampler,
    fine: dict[str, Any],
    size: tuple[int, int],
    *words: str,
) -> None:
    """`fine` at `size` (width, height), whose image tokens the ranks cannot share, sent to the
    ranks directly (the submit check would have refused it): each refuses it before the
    transformer, a 422 whose message starts with `words[0]` and holds the rest (the cause and
    the fix, not cache-dit's exchange of unequal shards), and the group renders `fine` next."""
    width, height = size
    with pytest.raises(RemoteJobError) as refused:
        group.run(SampleJob(handle, handle.request(**{**fine, "width": width, "height": height})))
    assert (refused.value.status, refused.value.code) == (422, InvalidRequest.code)
    why = refused.value.message
    assert why.startswith(words[0]), why
    assert all(phrase in why for phrase in words[1:]), why
    assert isinstance(group.run(SampleJob(handle, handle.request(**fine))), Image.Image)
