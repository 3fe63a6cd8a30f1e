"""LTX-2 split over a worker group of two gloo ranks (cache-dit's LTX2 plan, Ulysses): the video
and its soundtrack equal the in-process render (at the ranks' thread count: oneDNN's float
reductions depend on it), with guidance, from an image, and with the step cache deciding on
all-reduced sums; what the split refuses (a sequence its ranks cannot share) is a 422 reason at
submit. The module renders on the run's shared cache-dit group (`tests/worker_groups.py`; the same
split, runner and heartbeat), its ranks loading LTX-2's stack in place of the one they hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import first_frame_image

from inline_core.contract.sources import Sources
from inline_core.device.split import ParallelSpec
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.ltx2 import LTX2Family
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.kit import FOLDER, LTX2Kit
from inline_core.models.catalog import Catalog
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.runner import DEFAULT_RUNNER, resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.step_cache import StepCacheSettings
from inline_core.runtime.video import Video
from inline_core.sampling import SampleJob, StepLoopSampler
from tests.parallel.parallel_support import group_config
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="cache-dit", stack="ltx2 kit")

SPLIT = ParallelSpec.parse("ulysses=2")
CPU_DTYPES = {"text_encoder": "float32", "denoiser": "float32", "vae": "float32"}
# 5 frames at 12 fps: 3 latent frames of 16x16 (768 video tokens), 10 soundtrack frames, and the
# kit's 16 prompt tokens: each shared evenly by two ranks.
SHAPE: dict[str, Any] = {"width": 32, "height": 32, "frames": 5, "fps": 12, "format": "png"}
TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values
AUDIO_TOLERANCE = 1e-4
LOOSE = StepCacheSettings(threshold=0.9, warmup=2, front_blocks=1, max_consecutive=2)


@pytest.fixture(scope="module")
def family(ltx2_kit: LTX2Kit) -> LTX2Family:
    return LTX2Family(Catalog(ltx2_kit.root), {})


@pytest.fixture(scope="module")
def sources(family: LTX2Family) -> Sources:
    return family.resolve(NODE_TYPE, {"model": FOLDER}).require()


@pytest.fixture(scope="module")
def handle(family: LTX2Family, sources: Sources) -> GroupPipeline:
    """The server's handle on the kit's stack in the ranks (what a split render sends)."""
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return shared_sampler(
        request, "cache-dit", lambda: ParallelSampler(group_config(DEFAULT_RUNNER), retries=1)
    )


@pytest.fixture(scope="module")
def local(handle: GroupPipeline, group: ParallelSampler) -> Iterator[tuple[Any, StepLoopSampler]]:
    """The same stack in this process, built by the loader the ranks use, run at a rank's
    thread count."""
    spec = handle.remote_spec()
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    threads = torch.get_num_threads()
    torch.set_num_threads(group.config.rank_threads())
    loop = StepLoopSampler()  # its loop thread takes the count above at its first op
    yield pipeline, loop
    loop.close()
    torch.set_num_threads(threads)


def assert_same(alone: Video, split: Video) -> None:
    assert alone.frames.shape == split.frames.shape
    difference = np.abs(alone.frames.astype(np.int16) - split.frames.astype(np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING
    assert alone.audio is not None and split.audio is not None
    assert alone.audio.samples.shape == split.audio.samples.shape
    assert float(np.abs(alone.audio.samples - split.audio.samples).max()) <= AUDIO_TOLERANCE


RENDERS: dict[str, dict[str, Any]] = {
    "text": {"guidance": 3.0, "steps": 3},
    "image": {"guidance": 3.0, "steps": 3, "image": first_frame_image(32, 32, 5)},
    "cached": {"guidance": 3.0, "steps": 8, "step_cache": LOOSE},
}


@pytest.mark.parametrize("name", list(RENDERS))
def test_a_split_render_equals_the_in_process_render(
    name: str,
    handle: GroupPipeline,
    group: ParallelSampler,
    local: tuple[Any, StepLoopSampler],
) -> None:
    spec: dict[str, Any] = {**SHAPE, "prompt": f"a {name} render", "seed": 4, **RENDERS[name]}
    pipeline, loop = local
    state = pipeline.request(**spec)
    probe = AttentionProbe(pipeline.transformer)
    try:
        alone = loop.run(SampleJob(pipeline, state))
    finally:
        probe.remove()
    remote = handle.request(**spec)
    assert remote.max_prompt_tokens == state.max_prompt_tokens  # the prompt padded alike
    got = group.run(SampleJob(handle, remote))
    assert isinstance(alone, Video) and isinstance(got, Video)
    assert_same(alone, got)
    meta = group.last_meta
    assert [meta[rank]["engine"] for rank in (0, 1)] == ["cache-dit", "cache-dit"]
    # A real split: each rank's attention layers saw half the tokens one process saw (the
    # video's, the soundtrack's and the prompts', each sharded).
    first = probe.first_forward
    assert first and all(n % 2 == 0 for n in first)
    assert [meta[rank]["attentionTokens"] for rank in (0, 1)] == [[n // 2 for n in first]] * 2
    if "step_cache" in spec:  # every rank decided alike: the counts of one process
        assert state.cache.stats()["reusedSteps"] > 0
        assert remote.cache.stats() == state.cache.stats()


def test_a_sequence_the_ranks_cannot_share_is_refused_naming_it(
    family: LTX2Family, sources: Sources
) -> None:
    assert family.unsplittable(NODE_TYPE, SHAPE, SPLIT, sources) is None
    assert family.unsplittable(NODE_TYPE, {**SHAPE, "fps": 25}, ParallelSpec(), sources) is None
    why = family.unsplittable(NODE_TYPE, {**SHAPE, "fps": 25}, SPLIT, sources)
    assert why is not None  # 5 frames at 25 fps: 5 soundtrack frames
    assert why.startswith("32x32 at 5 frames and 25 fps has the soundtrack's 5 tokens")
    assert "the 2 ranks of this server's split (INLINE_PARALLEL=ulysses=2)" in why
    support = family.split_support(sources.get("transformer"))
    assert (support.family, support.heads, support.ulysses_degrees) == ("ltx2", 2, (2,))
    caps = family.describe()
    assert (caps["splitMethods"], caps["splitEngines"]) == (["ring", "ulysses"], ["cache-dit"])
