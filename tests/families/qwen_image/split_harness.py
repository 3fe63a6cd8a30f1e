"""What the Qwen-Image split tests share: each model's stack in the ranks and in this process,
and the comparison of a split render with the in-process one. Edit references are encoded at
small areas on both sides (`tests/parallel/qwen_small_references.py`): three references at a
megapixel each took a split case minutes on a loaded CPU.

Tolerance, as the other families' split tests: at most one level (of 255) on at most 0.1% of the
values (each rank's matmuls run over its shard; oneDNN's blocking, hence its float sums' order,
follows the shapes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from qwen_harness import TEXT_MODEL

from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image import request as qwen_request
from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.families.qwen_image.pipeline import QwenImageStepPipeline
from inline_core.families.qwen_image.request import QwenImageRequest
from inline_core.families.qwen_image.split_plan import ImagePads
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.remote import PipelineSpec
from inline_core.parallel.runner import resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob, StepLoopSampler
from tests.parallel.qwen_small_references import RANK_LOADER, SMALL_CONDITION, SMALL_REFERENCE
from tests.parallel.zimage_support import CPU_DTYPES, rank_threads

TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values


class Stacks:
    """Each model's handle in the ranks (what a split render sends) and the same stack in this
    process, built by the loader the ranks use, stepped at a rank's thread count (oneDNN's float
    reductions depend on it)."""

    def __init__(self, family: QwenImageFamily) -> None:
        self.family = family
        self.loop = StepLoopSampler()  # its loop thread takes the count set at its first op
        self._made: dict[str, tuple[GroupPipeline, QwenImageStepPipeline]] = {}

    def __call__(self, model: str) -> tuple[GroupPipeline, QwenImageStepPipeline]:
        if model not in self._made:
            family = self.family
            sources = family.resolve(NODE_TYPE, {"model": model}).require()
            spec = rank_spec(family, "node", sources, CPU_DTYPES)
            small = PipelineSpec(RANK_LOADER, spec.args)  # the ranks' references small too
            handle = GroupPipeline(family, small, "node", sources)
            pipeline = resolve(spec.loader)(device="cpu", **spec.args)
            assert isinstance(pipeline, QwenImageStepPipeline)
            self._made[model] = handle, pipeline
        return self._made[model]


def stacks_beside(family: QwenImageFamily, group: ParallelSampler) -> Iterator[Stacks]:
    """A module's `Stacks`, this process at a rank's thread count and its references at the
    ranks' small areas while it lives."""
    threads = torch.get_num_threads()
    torch.set_num_threads(rank_threads(group.config))
    made = Stacks(family)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(qwen_request, "REFERENCE_AREA", SMALL_REFERENCE)
        patch.setattr(qwen_request, "CONDITION_AREA", SMALL_CONDITION)
        yield made
    made.loop.close()
    torch.set_num_threads(threads)


def assert_split_equals_alone(
    spec: dict[str, Any], group: ParallelSampler, stacks: Stacks
) -> tuple[QwenImageRequest, QwenImageRequest]:
    """Render `spec` in this process and on `group`'s two ranks: the images agree, every rank
    ran on cache-dit, and each rank's attention saw half the (padded) sequence. Returns the
    in-process and the remote request states."""
    spec = dict(spec)
    handle, pipeline = stacks(spec.pop("model", TEXT_MODEL))
    state = pipeline.request(**spec)
    probe = AttentionProbe(pipeline.denoiser.transformer)
    try:
        alone = stacks.loop.run(SampleJob(pipeline, state))
    finally:
        probe.remove()
    remote = handle.request(**spec)
    got = group.run(SampleJob(handle, remote))
    assert isinstance(alone, Image.Image) and isinstance(got, Image.Image)
    assert alone.size == got.size == (spec["width"], spec["height"])
    difference = np.abs(np.asarray(alone, np.int16) - np.asarray(got, np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING
    meta = group.last_meta
    assert [meta[rank]["engine"] for rank in range(group.config.nproc)] == ["cache-dit"] * (
        group.config.nproc
    )
    # A real split: each rank's attention layers saw its share of the (padded) image.
    whole = probe.first_forward
    assert whole and len(set(whole)) == 1
    ranks = group.config.nproc
    share = ImagePads(whole[0], ranks).shard
    assert [meta[rank]["attentionTokens"] for rank in range(ranks)] == [
        [share] * len(whole)
    ] * ranks
    return state, remote
