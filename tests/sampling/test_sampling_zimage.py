"""Batched renders of the real tiny Z-Image equal their solo renders (random weights, CPU)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import pytest

pytest.importorskip("diffusers")

from sampling_toy import wait_until  # noqa: E402
from zimage_sampling_kit import Watched, load_pipeline, pixels, solo_render  # noqa: E402

from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.families.zimage.request import ZImageRequest  # noqa: E402
from inline_core.sampling import SampleJob, StepLoopSampler  # noqa: E402

# Batched attention over padded per-request sequences matches separate forwards to ~1e-6
# (DESIGN.md section 4); after 8-bit quantisation that is at most one level on a pixel.
PIXEL_TOLERANCE = 1

REQUESTS: list[dict[str, Any]] = [
    {"prompt": "a red fox in the snow", "width": 64, "height": 64, "steps": 4, "seed": 1},
    {"prompt": "a blue bird", "width": 32, "height": 48, "steps": 3, "seed": 2},
    {"prompt": "a cat on a mat, oil painting", "width": 48, "height": 32, "steps": 2, "seed": 3},
    {"prompt": "a red fox in the snow", "width": 64, "height": 64, "steps": 5, "seed": 4},
    # With guidance: another batch key (two sequences per request), grouped among themselves.
    {
        "prompt": "a lighthouse",
        "width": 32,
        "height": 32,
        "steps": 3,
        "seed": 5,
        "guidance": 2.0,
        "negative_prompt": "blurry",
    },
    {"prompt": "a boat", "width": 48, "height": 48, "steps": 2, "seed": 6, "guidance": 3.0},
]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZImageStepPipeline]:
    import torch

    # Tiny forwards: one intra-op thread avoids OpenMP barrier stalls on a shared 2-core machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    loader = StepLoopSampler(max_batch=1)  # the runner wants one; these tests drive their own
    yield load_pipeline(tmp_path_factory.mktemp("zimage-sampling") / "models", loader)
    loader.close()
    torch.set_num_threads(threads)


def request(pipeline: ZImageStepPipeline, spec: dict[str, Any]) -> ZImageRequest:
    return pipeline.request(**{"guidance": 0.0, **spec})


def solo(pipeline: ZImageStepPipeline, specs: Sequence[dict[str, Any]]) -> list[Any]:
    return [pixels(solo_render(pipeline, request(pipeline, s))) for s in specs]


def assert_close(got: Sequence[Any], want: Sequence[Any]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert int(abs(g - w).max()) <= PIXEL_TOLERANCE


def render_held_together(
    sampler: StepLoopSampler,
    watched: Watched,
    pipeline: ZImageStepPipeline,
    specs: Sequence[dict[str, Any]],
) -> list[Any]:
    """Submit every request while `watched` holds the first forward, release it once all are
    queued (so they are stepped together), and return their pixels in order."""
    futures = [sampler.submit(SampleJob(watched, request(pipeline, s))) for s in specs]
    wait_until(
        lambda: (
            bool(watched.batches)
            and sampler.stats()["encodingJobs"] == 0
            and sampler.stats()["activeJobs"] + sampler.stats()["queuedJobs"] == len(futures)
        ),
        "all jobs queued",
    )
    watched.release.set()
    return [pixels(f.result(timeout=120)) for f in futures]


def test_batched_renders_equal_their_solo_renders(pipeline: ZImageStepPipeline) -> None:
    watched = Watched(pipeline)
    sampler = StepLoopSampler(max_batch=8, token_budget=4096)
    try:
        got = render_held_together(sampler, watched, pipeline, REQUESTS)
    finally:
        sampler.close()

    assert_close(got, solo(pipeline, REQUESTS))
    plain = {s["seed"] for s in REQUESTS if "guidance" not in s}
    guided = {s["seed"] for s in REQUESTS if "guidance" in s}
    assert any(len(b) > 1 for b in watched.batches)
    for group in watched.batches:  # guided and plain requests never share a forward
        assert set(group) <= plain or set(group) <= guided


def test_a_request_arriving_mid_way_joins_and_matches_its_solo_render(
    pipeline: ZImageStepPipeline,
) -> None:
    watched = Watched(pipeline)
    watched.release.set()
    sampler = StepLoopSampler(max_batch=8, token_budget=4096, phases="loop")
    first = {"prompt": "a red fox in the snow", "width": 64, "height": 64, "steps": 8, "seed": 11}
    late = {"prompt": "a small house", "width": 32, "height": 64, "steps": 3, "seed": 12}
    arrived: list[Future[Any]] = []

    def arrive(states: Sequence[ZImageRequest]) -> None:
        if not arrived and states[0].seed == 11 and states[0].step_index == 3:
            arrived.append(sampler.submit(SampleJob(watched, request(pipeline, late))))

    watched.before_forward.append(arrive)
    try:
        got_first = pixels(sampler.run(SampleJob(watched, request(pipeline, first))))
        got_late = pixels(arrived[0].result(timeout=120))
    finally:
        sampler.close()

    assert_close([got_first, got_late], solo(pipeline, [first, late]))
    assert (11, 12) in watched.batches


def test_batching_off_gives_the_same_pixels(pipeline: ZImageStepPipeline) -> None:
    sampler = StepLoopSampler(max_batch=1)
    try:
        futures = [sampler.submit(SampleJob(pipeline, request(pipeline, s))) for s in REQUESTS[:3]]
        got = [pixels(f.result(timeout=120)) for f in futures]
    finally:
        sampler.close()
    want = solo(pipeline, REQUESTS[:3])
    assert all((g == w).all() for g, w in zip(got, want, strict=True))
    assert sampler.stats()["batchedForwards"] == 0


def test_renders_finishing_together_are_decoded_in_one_call_and_match_solo(
    pipeline: ZImageStepPipeline,
) -> None:
    # Two shapes, equal step counts: the 32 px trio and the 48x32 pair each share one VAE call.
    specs: list[dict[str, Any]] = [
        {"prompt": f"a small house {i}", "width": 32, "height": 32, "steps": 2, "seed": 20 + i}
        for i in range(3)
    ] + [
        {"prompt": f"a wide field {i}", "width": 48, "height": 32, "steps": 2, "seed": 30 + i}
        for i in range(2)
    ]
    watched = Watched(pipeline)
    sampler = StepLoopSampler(max_batch=8, token_budget=4096)
    try:
        got = render_held_together(sampler, watched, pipeline, specs)
        stats = sampler.stats()
    finally:
        sampler.close()

    assert_close(got, solo(pipeline, specs))
    # The first forward may have run before all arrived; whoever finished together shared a call.
    assert sorted(seed for call in watched.decodes for seed in call) == sorted(
        s["seed"] for s in specs
    )
    for call in watched.decodes:
        assert set(call) <= {20, 21, 22} or set(call) <= {30, 31}
    assert stats["batchedDecodes"] >= 1
