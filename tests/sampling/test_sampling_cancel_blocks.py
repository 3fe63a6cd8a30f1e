"""A cancel takes effect within one transformer block (the real tiny Z-Image, CPU): a forward
whose every row is cancelled stops at the next block; a forward shared with a live row runs to its
end, the live row renders as it would alone, and the cancelled row is dropped at the step."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

pytest.importorskip("diffusers")

from sampling_toy import wait_until  # noqa: E402
from zimage_sampling_kit import Watched, load_pipeline, pixels, solo_render  # noqa: E402

from inline_core.diffusion.cancel_blocks import is_watched  # noqa: E402
from inline_core.errors import Cancelled  # noqa: E402
from inline_core.families.zimage.pipeline import ZImageStepPipeline  # noqa: E402
from inline_core.runtime.cancel import CancelToken  # noqa: E402
from inline_core.sampling import SampleJob, StepLoopSampler  # noqa: E402
from tests.batching_helpers import all_in_loop  # noqa: E402

FIRST = {"prompt": "a red fox", "width": 64, "height": 64, "steps": 6, "seed": 1, "guidance": 0.0}
OTHER = {"prompt": "a blue bird", "width": 64, "height": 64, "steps": 6, "seed": 2, "guidance": 0.0}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZImageStepPipeline]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: no OpenMP barrier stalls on a shared machine
    loader = StepLoopSampler(max_batch=1)
    yield load_pipeline(tmp_path_factory.mktemp("cancel-blocks") / "models", loader)
    loader.close()
    torch.set_num_threads(threads)


class BlockWatch:
    """Cancels `token` as the main stack's first block starts its forward, once armed; counts the
    blocks after it that start while the token is cancelled."""

    def __init__(self, pipeline: ZImageStepPipeline, token: CancelToken) -> None:
        layers: Any = pipeline.denoiser.transformer.layers
        assert len(layers) >= 2
        self.token = token
        self.armed = False
        self.after_cancel = 0
        self._handles = [layers[0].register_forward_pre_hook(self._first)]
        self._handles += [b.register_forward_pre_hook(self._later) for b in list(layers)[1:]]

    def _first(self, _module: Any, _args: Any) -> None:
        if self.armed:
            self.token.cancel("cancelled by the test")

    def _later(self, _module: Any, _args: Any) -> None:
        if self.token.cancelled:
            self.after_cancel += 1

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def job(watched: Watched, pipeline: ZImageStepPipeline, spec: dict[str, Any]) -> SampleJob:
    return SampleJob(watched, pipeline.request(**spec), cancel=CancelToken())


def test_the_denoiser_blocks_are_watched_from_the_build(pipeline: ZImageStepPipeline) -> None:
    transformer = pipeline.denoiser.transformer
    assert is_watched(transformer)
    layers: Any = transformer.layers
    assert all(len(block._forward_pre_hooks) == 1 for block in layers)  # once, however built


def test_a_lone_cancelled_render_stops_within_one_block(pipeline: ZImageStepPipeline) -> None:
    watched = Watched(pipeline)
    watched.release.set()
    sampler = StepLoopSampler(max_batch=4)
    alone = job(watched, pipeline, FIRST)
    watch = BlockWatch(pipeline, alone.cancel)

    def arm(states: Any) -> None:
        if states[0].step_index == 2:
            watch.armed = True

    watched.before_forward.append(arm)
    try:
        with pytest.raises(Cancelled):
            sampler.run(alone)
    finally:
        watch.close()
        sampler.close()
    assert alone.cancel.cancelled
    assert watch.after_cancel == 0  # the block in progress finished; no later block started
    assert sampler.stats()["cancelledJobs"] == 1


def test_a_shared_forward_runs_on_for_its_live_row(pipeline: ZImageStepPipeline) -> None:
    watched = Watched(pipeline)
    sampler = StepLoopSampler(max_batch=4, token_budget=4096)
    cancelled = job(watched, pipeline, FIRST)
    live = job(watched, pipeline, OTHER)
    watch = BlockWatch(pipeline, cancelled.cancel)
    futures: list[Future[Any]] = [sampler.submit(cancelled), sampler.submit(live)]

    def arm(states: Any) -> None:
        if len(states) == 2 and states[0].step_index == 2:
            watch.armed = True

    watched.before_forward.append(arm)
    try:
        # Both encoded before the first forward goes on: a job still encoding joins whenever its
        # encode ends, and under load that was after the step the cancel is armed at.
        wait_until(
            lambda: bool(watched.batches) and all_in_loop(sampler, 2) is True,
            "both jobs encoded and in the loop",
        )
        watched.release.set()
        with pytest.raises(Cancelled):
            futures[0].result(timeout=120)
        got = pixels(futures[1].result(timeout=120))
    finally:
        watch.close()
        sampler.close()
    assert watch.after_cancel > 0  # the shared forward ran every block for its live row
    assert (1, 2) in watched.batches and (2,) in watched.batches  # dropped at the next step
    want = pixels(solo_render(pipeline, pipeline.request(**OTHER)))
    assert int(abs(got - want).max()) <= 1  # the live row is untouched (as batched vs solo)
