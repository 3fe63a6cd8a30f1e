"""Z-Image split across 2 gloo ranks by cache-dit (INLINE_PROFILE=cpu, INLINE_PARALLEL=ulysses=2),
rebuilt in each rank by the shared rank loader (`engine/remote.py`): the take equals the
in-process take, and each rank's attention really saw half the tokens."""

from __future__ import annotations

import io
import threading
from typing import Any

import numpy as np
import pytest
from parallel_support import group_config
from PIL import Image
from zimage_support import kit_handle, load_spec, render_in_process

from inline_core.engine.group import LOADER, GroupPipeline
from inline_core.engine.remote import load_for_rank
from inline_core.errors import Cancelled
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.parallel.group import WorkerGroup
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.runner import resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.preview import EncodedPreview
from inline_core.sampling import SampleJob
from inline_core.sampling.previews import PreviewWorker

KW: dict[str, Any] = {"prompt": "a red fox", "width": 64, "height": 64, "steps": 4, "seed": 7}


pytestmark = pytest.mark.worker_group(shared="cache-dit", stack="z-image kit")


@pytest.fixture(scope="module")
def handle(kit: KitPaths) -> GroupPipeline:
    """The server's handle on the kit's stack in the ranks."""
    return kit_handle(kit.root)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> ZImageStepPipeline:
    """The pipeline in this process, built by the very loader (and spec) the ranks use."""
    spec = handle.remote_spec()
    assert spec.loader == LOADER and resolve(spec.loader) is load_for_rank
    return load_spec(spec)


@pytest.fixture(scope="module")
def sampler(cache_dit_group: ParallelSampler) -> ParallelSampler:
    return cache_dit_group


def _in_process(pipe: ZImageStepPipeline, events: list[object], **kw: Any) -> Image.Image:
    return render_in_process(pipe, group_config(), events, **kw)


def _group(sampler: ParallelSampler) -> WorkerGroup:
    group = sampler._group  # pyright: ignore[reportPrivateUsage]
    assert group is not None
    return group


def test_split_take_equals_in_process_take(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    probe = AttentionProbe(local.denoiser.transformer)
    try:
        local_events: list[object] = []
        expected = _in_process(local, local_events, guidance=0.0, **KW)
        whole = list(probe.first_forward)
    finally:
        probe.remove()
    events: list[object] = []
    job = SampleJob(
        pipeline=handle,
        state=handle.request(guidance=0.0, **KW),
        on_phase=events.append,
        on_step=lambda s, c: events.append((s, c)),
    )
    got = sampler.run(job)
    assert isinstance(got, Image.Image)
    assert (got.mode, got.size) == (expected.mode, expected.size)
    assert np.array_equal(np.asarray(got), np.asarray(expected))  # the same pixels, exactly
    assert events == local_events == ["encode", "sample", (1, 4), (2, 4), (3, 4), (4, 4), "decode"]
    # A real split: every attention layer of every rank saw half of what one process sees.
    meta = sampler.last_meta
    assert whole and all(n % 2 == 0 for n in whole)
    for rank in (0, 1):
        assert meta[rank]["engine"] == "cache-dit"
        assert meta[rank]["attentionTokens"] == [n // 2 for n in whole]
        assert meta[rank]["forwards"] == 4


def test_img2img_with_guidance_equals_in_process(
    local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    source = Image.fromarray(np.random.default_rng(3).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    kw = {**KW, "guidance": 2.5, "negative_prompt": "blurry", "image": source, "strength": 0.75}
    expected = _in_process(local, [], **kw)
    got = sampler.run(SampleJob(pipeline=handle, state=handle.request(**kw)))
    assert np.array_equal(np.asarray(got), np.asarray(expected))
    # With guidance the forward carries the positive and the negative sequence; both were split.
    assert len(sampler.last_meta[1]["attentionTokens"]) > 0  # pyright: ignore[reportArgumentType]


def test_cancel_crosses_into_the_group(handle: GroupPipeline, sampler: ParallelSampler) -> None:
    token = CancelToken()
    steps: list[int] = []

    def on_step(step: int, count: int) -> None:
        steps.append(step)
        token.cancel("cancelled by the client")

    job = SampleJob(
        pipeline=handle,
        state=handle.request(guidance=0.0, **{**KW, "steps": 40}),
        cancel=token,
        on_step=on_step,
    )
    before = _group(sampler).pids()
    with pytest.raises(Cancelled, match="cancelled by the client"):
        sampler.run(job)
    assert 1 <= len(steps) < 40
    assert _group(sampler).pids() == before  # the group stays resident


def test_rank_0_renders_step_previews_of_a_split_render(
    kit: KitPaths, local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    """Rank 0's step loop previews the split forward's x0 estimate with the same renderer, and
    each image reaches the job's sink on the server as a `PreviewFrame`; the take is unchanged.
    Rank 0 sends the job's result only after its last preview, so the last step's preview is
    shown before the job ends here and none after (a later job on the group, its messages
    behind any late frame on rank 0's connection, would have brought one)."""
    shown: list[tuple[EncodedPreview, int, int]] = []
    late: list[int] = []  # steps shown after the job had ended
    ended = threading.Event()

    def show(image: EncodedPreview, step: int, count: int) -> None:
        if ended.is_set():
            late.append(step)
        shown.append((image, step, count))

    worker = PreviewWorker()  # the server side's: a split job's previews never render here
    try:
        remote: dict[str, Any] = {
            "method": "taesd",
            "size": 32,
            "vaeApprox": str(kit.root / "vae_approx"),
        }
        channel = worker.channel(lambda latents, fmt: None, show, remote)
        job = SampleJob(pipeline=handle, state=handle.request(guidance=0.0, **KW))
        job.preview = channel
        got = sampler.run(job)
        ended.set()
        assert shown and shown[-1][1] == 4  # the last step's, before the end
        sampler.run(SampleJob(pipeline=handle, state=handle.request(guidance=0.0, **KW)))
    finally:
        worker.close()
    assert late == []
    expected = _in_process(local, [], guidance=0.0, **KW)
    assert np.array_equal(np.asarray(got), np.asarray(expected))
    assert worker.counters.offered == 0  # rendered in rank 0, not here
    steps = [step for _image, step, _count in shown]
    assert shown and steps == sorted(set(steps)) and {c for *_rest, c in shown} == {4}
    for image, _step, _count in shown:
        assert (image.method, image.format, image.width, image.height) == ("taesd", "jpeg", 32, 32)
        assert Image.open(io.BytesIO(image.data)).size == (32, 32)
