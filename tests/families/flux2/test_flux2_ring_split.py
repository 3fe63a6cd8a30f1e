"""FLUX.2 klein split with Ring alone (ring=2, two gloo ranks): cache-dit shards the prompt's and
the image's tokens as under Ulysses, and each block's attention (double- and single-stream) runs
over the shared masked ring, unmasked (`families/masked_ring.py`, routed by `flux2/ring.py`). The
take equals the in-process take, guided and unguided, each rank's blocks attending over half the
sequence.

It renders on Qwen-Image's ring=2 group (`qwen-ring-alone`, `tests/worker_groups.py`): a group's
split is its ranks' launch setting, and its ranks load this stack in place of the last one, so no
group is started for it. Tolerance: FLUX.2's (`tests/families/split_take_harness.py`)."""

from __future__ import annotations

from typing import Any

import pytest
from flux2_split_harness import GUIDED, UNGUIDED, assert_split_equals_alone

from inline_core.device.split import ParallelSpec
from inline_core.engine.group import GroupPipeline
from inline_core.families.flux2.pipeline import Flux2StepPipeline
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from tests.parallel.parallel_support import split_group_config
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="qwen-ring-alone")

RING = ParallelSpec.parse("ring=2")


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    def make() -> ParallelSampler:
        return ParallelSampler(split_group_config(RING, DEFAULT_RUNNER), retries=1)

    return shared_sampler(request, "qwen-ring-alone", make)


@pytest.mark.parametrize(
    "render", [pytest.param(GUIDED, id="guided"), pytest.param(UNGUIDED, id="unguided")]
)
def test_a_ring_take_equals_the_in_process_take(
    local: Flux2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    assert_split_equals_alone(local, handle, group, render)
