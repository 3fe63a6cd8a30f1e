"""FLUX.2 klein split with Ring alone (ring=2, two gloo ranks): cache-dit shards the prompt's and
the image's tokens as under Ulysses, and each block's attention (double- and single-stream) runs
over the shared masked ring, unmasked (`families/masked_ring.py`, routed by `flux2/ring.py`). The
take equals the in-process take, klein guided and unguided and dev with its embedded guidance
(its stack loaded last, once), each rank's blocks attending over half the sequence.

It renders on Qwen-Image's ring=2 group (`qwen-ring-alone`, `tests/worker_groups.py`): a group's
split is its ranks' launch setting, and its ranks load this stack in place of the last one, so no
group is started for it. Tolerance: FLUX.2's (`tests/families/split_take_harness.py`)."""

from __future__ import annotations

from typing import Any

import pytest
from flux2_split_harness import (
    DEV_MODEL,
    GUIDED,
    UNGUIDED,
    assert_split_equals_alone,
    in_process_at_rank_threads,
    split_handle,
)

from inline_core.engine.group import GroupPipeline
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.families.flux2.pipeline import Flux2StepPipeline
from inline_core.parallel.sampler import ParallelSampler
from tests.families.split_take_harness import RING_ALONE, ring_group

pytestmark = pytest.mark.worker_group(shared=RING_ALONE)


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return ring_group(request, RING_ALONE)


@pytest.mark.parametrize(
    "render", [pytest.param(GUIDED, id="guided"), pytest.param(UNGUIDED, id="unguided")]
)
def test_a_ring_take_equals_the_in_process_take(
    local: Flux2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    assert_split_equals_alone(local, handle, group, render)


def test_a_dev_ring_take_with_its_embedded_guidance_equals_the_in_process_take(
    flux2_dev_kit: Flux2DevKit, group: ParallelSampler
) -> None:
    handle = split_handle(flux2_dev_kit, DEV_MODEL)
    with in_process_at_rank_threads(handle, group) as local:
        assert_split_equals_alone(local, handle, group, GUIDED)
