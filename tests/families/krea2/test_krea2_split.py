"""Krea 2 split across 2 gloo ranks by cache-dit's Krea 2 planner (INLINE_PROFILE=cpu,
ulysses=2), on the run's shared cache-dit group (`tests/worker_groups.py`), the pipeline rebuilt
in each rank by the shared rank loader: the take equals the in-process take, guided (a prompt and
its negative in one forward) and unguided; renders sent at once share the split's forwards and
each equals its render alone; each rank's transformer blocks attended over half the joint
sequence (the text fusion over the whole prompt); image tokens the ranks cannot share are refused
on the ranks in words, before the transformer, and the group serves the next render.
Tolerance: FLUX.2's (`krea2_split_harness.py`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from krea2_split_harness import (
    GUIDED,
    KW,
    STEP_CACHE,
    TOLERANCE,
    UNGUIDED,
    alone,
    assert_close,
    assert_ranks_refuse,
    assert_split_equals_alone,
    assert_split_shares,
)

from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.engine.group import GroupPipeline
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob
from tests.parallel.parallel_support import at_once, group_config
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="cache-dit")


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return shared_sampler(
        request, "cache-dit", lambda: ParallelSampler(group_config(DEFAULT_RUNNER), retries=1)
    )


@pytest.mark.parametrize(
    "render",
    [
        pytest.param(GUIDED, id="guided"),
        pytest.param(UNGUIDED, id="unguided"),
        pytest.param(STEP_CACHE, id="step cache"),
    ],
)
def test_a_split_take_equals_the_in_process_take(
    local: Krea2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    assert_split_equals_alone(local, handle, group, render)


def test_renders_sent_at_once_share_the_split_and_each_equals_its_render_alone(
    local: Krea2StepPipeline, handle: GroupPipeline, group: ParallelSampler, krea2_kit: Krea2Kit
) -> None:
    """Two renders at once share the split's forwards (the second with a LoRA on the blocks'
    feed-forwards, run on the ranks' halves, and the text fusion's, run whole), and each take
    equals its render alone in process."""
    path = krea2_kit.loras["b-krea"]  # Krea's naming, as ComfyUI's files
    lora = LoraUse(path.name, str(path), f"{path.name}:{path.stat().st_mtime_ns}", 1.0)
    renders: list[dict[str, Any]] = [
        {"prompt": "a lighthouse at dusk", "seed": 1, "guidance": 3.0},
        {
            "prompt": "a boat",
            "negative_prompt": "fog",
            "seed": 2,
            "guidance": 5.0,
            "loras": (lora,),
        },
    ]
    jobs = [SampleJob(handle, handle.request(**{**KW, **r})) for r in renders]
    outputs = at_once(group, jobs)
    assert group.stats()["rankLoop"]["batchedForwards"] > 0  # both rows in one split forward
    singles = [alone(local, render) for render in renders]
    for output, (expected, _whole, _state) in zip(outputs, singles, strict=True):
        assert_close(output, expected)
    first, second = (np.asarray(o, np.int16) for o in outputs)
    assert int(np.abs(first - second).max()) > TOLERANCE  # each row got its own picture
    assert_split_shares(group, singles[-1][1])


def test_a_rank_refuses_image_tokens_it_cannot_share_in_words(
    handle: GroupPipeline, group: ParallelSampler
) -> None:
    assert_ranks_refuse(
        handle,
        group,
        (48, 48),
        "48x48 is 9 image tokens for Krea 2 (3x3 patches of 16 px)",
        "the 2 ranks of this server's split (INLINE_PARALLEL)",
        "a side of a multiple of 32 px fits",
    )
