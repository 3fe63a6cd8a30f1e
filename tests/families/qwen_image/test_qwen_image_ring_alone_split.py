"""Qwen-Image split with Ring alone (ring=2, two gloo ranks): each rank keeps its half of the
sequence and the keys go round (`ring_attention.py`), with no Ulysses trade around them, so the
take equals the in-process take with a pad in the image and the negative prompt's row masked past
its end.

It has a group of its own (`qwen-ring-alone`): a group's split is its ranks' launch setting,
applied once when a rank loads its pipeline, so `test_qwen_image_ring_split.py`'s four-rank USP
group cannot serve a ring=2 job without relaunching its ranks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from qwen_harness import PROMPT
from split_harness import Stacks, assert_split_equals_alone, stacks_beside

from inline_core.device.split import ParallelSpec
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.models.catalog import Catalog
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from tests.parallel.parallel_support import split_group_config
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="qwen-ring-alone")

RING = ParallelSpec.parse("ring=2")


@pytest.fixture(scope="module")
def family(qwen_kit: KitPaths) -> QwenImageFamily:
    return QwenImageFamily(Catalog(qwen_kit.root), {})


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    def make() -> ParallelSampler:
        return ParallelSampler(split_group_config(RING, DEFAULT_RUNNER), retries=1)

    return shared_sampler(request, "qwen-ring-alone", make)


@pytest.fixture(scope="module")
def stacks(family: QwenImageFamily, group: ParallelSampler) -> Iterator[Stacks]:
    yield from stacks_beside(family, group)


def test_a_ring_alone_render_equals_the_in_process_render(
    group: ParallelSampler, stacks: Stacks
) -> None:
    # 48x48: 9 image tokens, one a pad; guided: the negative prompt is shorter, masked past its end
    spec = {"prompt": PROMPT, "steps": 3, "seed": 5, "guidance": 4.0, "width": 48, "height": 48}
    assert_split_equals_alone(spec, group, stacks)
