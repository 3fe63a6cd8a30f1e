"""Z-Image split across 2 gloo ranks by xDiT (xfuser 0.7), the engine the server picks on CUDA.

The ranks load through `xfuser_on_cpu`, which lifts xfuser's CUDA-only gates so its own Z-Image
transformer class and USP attention run on CPU. The take equals the in-process take, and each
rank's attention saw half the tokens, also with a negative prompt of another length (xDiT drops
the padding mask, so such a batch runs one sequence per forward). Without that runner, asking for
xfuser on CPU ranks is a clear start error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parallel_support import group_children, group_config, xfuser_config
from zimage_support import kit_handle, load_spec, render_in_process

from inline_core.engine.group import GroupPipeline
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.parallel.errors import WorkerStartError
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob

KW: dict[str, Any] = {"prompt": "a red fox", "width": 64, "height": 64, "steps": 3, "seed": 11}
LONG_NEGATIVE = (
    "blurry, low quality, jpeg artifacts, watermark, text, signature, oversaturated, deformed "
    "hands, extra fingers, cropped, out of frame, worst quality, noisy, grainy"
)


pytestmark = pytest.mark.worker_group(shared="xfuser")


@pytest.fixture(scope="module")
def handle(kit: KitPaths) -> GroupPipeline:
    return kit_handle(kit.root)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> ZImageStepPipeline:
    return load_spec(handle.remote_spec())


@pytest.fixture(scope="module")
def sampler(xfuser_group: ParallelSampler) -> ParallelSampler:
    return xfuser_group


@pytest.mark.parametrize("guidance", [0.0, 2.5])
def test_xfuser_split_take_equals_in_process_take(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler, guidance: float
) -> None:
    probe = AttentionProbe(local.denoiser.transformer)
    try:
        expected = render_in_process(local, group_config(), None, guidance=guidance, **KW)
        whole = list(probe.first_forward)
    finally:
        probe.remove()
    got = sampler.run(SampleJob(pipeline=handle, state=handle.request(guidance=guidance, **KW)))
    assert np.array_equal(np.asarray(got), np.asarray(expected))
    # xDiT's transformer class replaced the resident one in both ranks, and really split it.
    assert whole and all(n % 2 == 0 for n in whole)
    for rank in (0, 1):
        meta = sampler.last_meta[rank]
        assert meta["engine"] == "xfuser"
        assert meta["attentionTokens"] == [n // 2 for n in whole]
        assert meta["forwards"] == KW["steps"]


def test_xfuser_on_cpu_ranks_without_it_is_a_clear_start_error(kit: KitPaths) -> None:
    others = {p.pid for p in group_children()}  # the module's xDiT group may be up
    plain = ParallelSampler(xfuser_config(DEFAULT_RUNNER), retries=0)
    try:
        with pytest.raises(WorkerStartError, match="the xfuser engine cannot load here"):
            plain.start(kit_handle(kit.root).remote_spec())
    finally:
        plain.close()
    assert {p.pid for p in group_children()} <= others  # the failed group left nothing


def test_a_negative_prompt_of_another_length_still_equals_in_process(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    kw = {**KW, "guidance": 2.5, "negative_prompt": LONG_NEGATIVE}
    probe = AttentionProbe(local.denoiser.transformer)
    try:
        expected = render_in_process(local, group_config(), None, **kw)
        whole = list(probe.first_forward)
    finally:
        probe.remove()
    got = sampler.run(SampleJob(pipeline=handle, state=handle.request(**kw)))
    # One sequence per forward instead of a masked pair: float sums in another order, no more.
    diff = np.abs(np.asarray(got).astype(np.int16) - np.asarray(expected).astype(np.int16))
    assert int(diff.max()) <= 1 and float(diff.mean()) < 0.01  # masks dropped: 66 and 9.5
    # Each sequence ran alone, split in two: no rank's attention saw a whole padded batch.
    for rank in (0, 1):
        seen = sampler.last_meta[rank]["attentionTokens"]
        assert isinstance(seen, list) and len(seen) == 2 * len(whole)
        assert max(n for n in seen if isinstance(n, int)) <= max(whole) // 2
