"""Krea 2's renders for the split tests (Ulysses, Ring, both; two or four gloo ranks) and how its
attention layers shard, over the shared split-take harness (`tests/families/split_take_harness.py`:
the in-process take a split's take is held to, FLUX.2's tolerance, a rank's refusal)."""

from __future__ import annotations

from typing import Any

from PIL import Image

from inline_core.engine.group import GroupPipeline
from inline_core.families.krea2.kit import TEXT_LAYERS, TRANSFORMER_CONFIG
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.families.krea2.request import TEXT_TOKENS, Krea2Request
from inline_core.parallel.sampler import ParallelSampler
from tests.families import split_take_harness as harness
from tests.families.step_cache_harness import LOOSE

MODEL = "krea2_tiny.safetensors"
TOLERANCE = harness.TOLERANCE
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
    return harness.alone(pipeline, {**KW, **render})


def assert_close(got: object, expected: Image.Image) -> None:
    harness.assert_close(got, expected, (KW["width"], KW["height"]))


def shares(whole: list[int], ranks: int) -> list[int]:
    """Its blocks' attention sees each rank's share of the joint sequence (the prompt's 512
    tokens and the image's) where one process saw it whole; the text fusion runs whole on every
    rank."""
    joint = TEXT_TOKENS + (KW["width"] // 16) * (KW["height"] // 16)
    assert whole.count(joint) == TRANSFORMER_CONFIG["num_layers"]  # each block, whole here
    return [n // ranks if n == joint else n for n in whole]


def assert_split_shares(group: ParallelSampler, whole: list[int]) -> None:
    harness.assert_split_shares(group, whole, shares)


def assert_split_equals_alone(
    local: Krea2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    harness.assert_split_equals_alone(local, handle, group, {**KW, **render}, shares)


def assert_ranks_refuse(
    handle: GroupPipeline, group: ParallelSampler, size: tuple[int, int], *words: str
) -> None:
    """An unguided render of `size` (width, height) whose image tokens the ranks cannot share
    is refused on each rank in `words`, and the group renders the next one."""
    harness.assert_ranks_refuse(handle, group, {**KW, **UNGUIDED}, size, *words)
