"""Helpers of the Krea 2 split tests (Ulysses, Ring, both; two or four gloo ranks): the in-process
render a split's take is held to, FLUX.2's tolerance, and each rank's share of the sequence.

Tolerance, as FLUX.2's and Qwen-Image's split tests: at most one level (of 255), on at most 0.1%
of the values (each rank's matmuls run over its share of the tokens; oneDNN's blocking, hence the
order of its float sums, follows the shapes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PIL import Image

from inline_core.engine.group import GroupPipeline
from inline_core.errors import InvalidRequest
from inline_core.families.krea2.kit import TEXT_LAYERS, TRANSFORMER_CONFIG
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.families.krea2.request import TEXT_TOKENS, Krea2Request
from inline_core.parallel.errors import RemoteJobError
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob, StepLoopSampler
from tests.families.step_cache_harness import LOOSE

MODEL = "krea2_tiny.safetensors"
TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values
# 64x48: 12 image tokens, which 2 and 4 ranks share
KW: dict[str, Any] = {"width": 64, "height": 48, "steps": 2, "text_layers": TEXT_LAYERS}
GUIDED: dict[str, Any] = {"prompt": "a red fox", "seed": 7, "guidance": 4.0}
UNGUIDED: dict[str, Any] = {"prompt": "a kite", "seed": 3, "guidance": 0.0}
# the step cache deciding on sums all-reduced over the ranks' shares
STEP_CACHE: dict[str, Any] = {
    "prompt": "a kite",
    "seed": 3,
    "guidance": 2.0,
    "steps": 6,
    "step_cache": LOOSE,
}


def alone(
    pipeline: Krea2StepPipeline, render: dict[str, Any]
) -> tuple[Image.Image, list[int], Krea2Request]:
    """The in-process take of `render`, the tokens each attention layer saw in its first
    forward, and the request's state."""
    probe = AttentionProbe(pipeline.transformer)
    loop = StepLoopSampler()
    state = pipeline.request(**{**KW, **render})
    try:
        image = loop.run(SampleJob(pipeline, state))
    finally:
        loop.close()
        probe.remove()
    assert isinstance(image, Image.Image)
    return image, list(probe.first_forward), state


def assert_close(got: object, expected: Image.Image) -> None:
    assert isinstance(got, Image.Image), got
    assert got.size == expected.size == (KW["width"], KW["height"])
    difference = np.abs(np.asarray(got, np.int16) - np.asarray(expected, np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING


def assert_split_shares(group: ParallelSampler, whole: list[int]) -> None:
    """Each rank ran on cache-dit, and its blocks' attention saw its share of the joint sequence
    (the prompt's 512 tokens and the image's) where one process saw it whole; the text fusion
    runs whole on every rank."""
    ranks = group.config.ranks.split.world_size
    joint = TEXT_TOKENS + (KW["width"] // 16) * (KW["height"] // 16)
    assert whole.count(joint) == TRANSFORMER_CONFIG["num_layers"]  # each block, whole here
    shares = [n // ranks if n == joint else n for n in whole]
    for rank in range(ranks):
        assert group.last_meta[rank]["engine"] == "cache-dit"
        assert group.last_meta[rank]["attentionTokens"] == shares


def assert_split_equals_alone(
    local: Krea2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    """The split's take of `render` equals the in-process take; under the step cache, every rank
    decided as the one process did."""
    expected, whole, state = alone(local, render)
    remote = handle.request(**{**KW, **render})
    got = group.run(SampleJob(handle, remote))
    assert_close(got, expected)
    assert_split_shares(group, whole)
    if "step_cache" in render:
        assert state.cache.stats()["reusedSteps"] > 0
        assert remote.cache.stats() == state.cache.stats()


def assert_ranks_refuse(
    handle: GroupPipeline, group: ParallelSampler, size: tuple[int, int], *words: str
) -> None:
    """A render of `size` (width, height) whose image tokens the ranks cannot share, sent to the
    ranks directly (the submit check would have refused it): each refuses it before the
    transformer, a 422 whose message starts with `words[0]` and holds the rest (the cause and
    the fix, not cache-dit's exchange of unequal shards), and the group renders the next one."""
    width, height = size
    odd = {**KW, **UNGUIDED, "width": width, "height": height}
    with pytest.raises(RemoteJobError) as refused:
        group.run(SampleJob(handle, handle.request(**odd)))
    assert (refused.value.status, refused.value.code) == (422, InvalidRequest.code)
    why = refused.value.message
    assert why.startswith(words[0]), why
    assert all(phrase in why for phrase in words[1:]), why
    fine = {**KW, **UNGUIDED}
    assert isinstance(group.run(SampleJob(handle, handle.request(**fine))), Image.Image)
