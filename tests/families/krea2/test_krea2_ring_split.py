"""Krea 2 split with Ring alone (ring=2, two gloo ranks): cache-dit's Krea 2 planner shards the
joint sequence as under Ulysses, and each block's attention runs over the shared masked ring
(`families/masked_ring.py`, routed by `krea2/ring.py`): cache-dit's ring takes no mask, and the
prompt is padded to 512 tokens and masked. The take equals the in-process take, guided,
unguided and under the step cache, each rank's blocks attending over its half of the sequence.

It renders on Qwen-Image's ring=2 group (`qwen-ring-alone`, `tests/worker_groups.py`): a group's
split is its ranks' launch setting, and its ranks load this stack in place of Qwen-Image's, so no
group is started for it. Tolerance: FLUX.2's (`krea2_split_harness.py`)."""

from __future__ import annotations

from typing import Any

import pytest
from krea2_split_harness import GUIDED, STEP_CACHE, UNGUIDED, assert_split_equals_alone

from inline_core.engine.group import GroupPipeline
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.parallel.sampler import ParallelSampler
from tests.families.split_take_harness import RING_ALONE, ring_group

pytestmark = pytest.mark.worker_group(shared=RING_ALONE)


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return ring_group(request, RING_ALONE)


@pytest.mark.parametrize(
    "render",
    [
        pytest.param(GUIDED, id="guided"),
        pytest.param(UNGUIDED, id="unguided"),
        pytest.param(STEP_CACHE, id="step cache"),
    ],
)
def test_a_ring_take_equals_the_in_process_take(
    local: Krea2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    assert_split_equals_alone(local, handle, group, render)
