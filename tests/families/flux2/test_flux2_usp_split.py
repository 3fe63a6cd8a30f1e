"""FLUX.2 klein split with Ring over Ulysses groups (USP: ulysses=2, ring=2, four gloo ranks):
each attention trades heads for tokens inside its Ulysses pair, then runs the shared masked ring
over the pairs (`families/ulysses_ring.py`), so the take equals the in-process take, unguided and
guided with a reference image (its tokens after the image's), each rank's blocks attending over a
quarter of the sequence; image tokens the four ranks cannot share (though two could) are refused
on each rank in words.

It renders on Qwen-Image's USP group (`qwen-ring`, `tests/worker_groups.py`), its ranks loading
this stack in place of the last one, so no group is started for it. Tolerance: FLUX.2's
(`tests/families/split_take_harness.py`)."""

from __future__ import annotations

from typing import Any

import pytest
from flux2_split_harness import (
    UNGUIDED,
    WITH_REFERENCE,
    assert_ranks_refuse,
    assert_split_equals_alone,
)

from inline_core.engine.group import GroupPipeline
from inline_core.families.flux2.pipeline import Flux2StepPipeline
from inline_core.parallel.sampler import ParallelSampler
from tests.families.split_take_harness import USP, ring_group

pytestmark = pytest.mark.worker_group(shared=USP)


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return ring_group(request, USP)


@pytest.mark.parametrize(
    "render",
    [pytest.param(UNGUIDED, id="unguided"), pytest.param(WITH_REFERENCE, id="guided, reference")],
)
def test_a_ring_over_ulysses_take_equals_the_in_process_take(
    local: Flux2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    assert_split_equals_alone(local, handle, group, render)


def test_each_rank_refuses_image_tokens_the_four_cannot_share_in_words(
    handle: GroupPipeline, group: ParallelSampler
) -> None:
    """96x48 is 18 image tokens: two ranks could share them, four cannot."""
    assert_ranks_refuse(
        handle,
        group,
        (96, 48),
        "96x48 is 18 image tokens for FLUX.2 (3x6 patches of 16 px)",
        "the 4 ranks of this server's split (INLINE_PARALLEL)",
        "a side of a multiple of 64 px fits",
    )
