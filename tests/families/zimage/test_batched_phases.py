"""Z-Image's batched decode (`post_decode_many`) on the real tiny models: equal to `post_decode`."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

pytest.importorskip("diffusers")

from zimage_harness import make_runner, max_diff, pixels  # noqa: E402

from inline_core.components.step import supports_batched_decode  # noqa: E402
from inline_core.families.zimage.kit import KitPaths  # noqa: E402
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.families.zimage.request import ZImageRequest  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402

# One VAE call over a batch of latents matches separate calls to ~1e-6 (oneDNN may block the
# convolutions differently for a batch); after 8-bit quantisation that is at most one level.
PIXEL_TOLERANCE = 1


@pytest.fixture(scope="module")
def pipeline(kit: KitPaths, sampler: StepLoopSampler) -> ZImageStepPipeline:
    runner = make_runner(kit.root, sampler)
    return runner.pipeline()


def sampled(pipeline: ZImageStepPipeline, seed: int, width: int = 32, **kw: Any) -> ZImageRequest:
    """A request stepped to its last step, not decoded."""
    state = pipeline.request(
        prompt=f"a lighthouse {seed}",
        width=width,
        height=32,
        steps=2,
        guidance=0.0,
        seed=seed,
        **kw,
    )
    state = pipeline.prepare_encode(state)
    while not state.done:
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    return state


def test_one_call_decodes_like_one_by_one(pipeline: ZImageStepPipeline) -> None:
    as_object: object = pipeline  # (a TypeGuard on `pipeline` would narrow it for the rest)
    assert supports_batched_decode(as_object)
    seeds = [1, 2, 3, 4]
    together = pipeline.post_decode_many([sampled(pipeline, s) for s in seeds])
    alone = [pipeline.post_decode(sampled(pipeline, s)) for s in seeds]
    assert len(together) == len(seeds)
    for got, want in zip(together, alone, strict=True):
        assert got.size == want.size == (32, 32)
        assert max_diff(pixels(got), pixels(want)) <= PIXEL_TOLERANCE
    # Distinct seeds give distinct images: the outputs are not one image repeated.
    assert not np.array_equal(pixels(together[0]), pixels(together[1]))


def test_the_decode_key_groups_by_latent_shape(pipeline: ZImageStepPipeline) -> None:
    square, square2, wide = sampled(pipeline, 1), sampled(pipeline, 2), sampled(pipeline, 3, 48)
    assert pipeline.decode_key(square) == pipeline.decode_key(square2)
    assert pipeline.decode_key(square) != pipeline.decode_key(wide)
    assert pipeline.decode_pixels(wide) == 48 * 32


def test_a_failed_call_leaves_every_state_decodable(pipeline: ZImageStepPipeline) -> None:
    good, bad = sampled(pipeline, 5), sampled(pipeline, 6)
    bad.latents = None  # e.g. released by an earlier decode
    with pytest.raises(RuntimeError, match="prepare_encode has not run"):
        pipeline.post_decode_many([good, bad])
    assert good.latents is not None
    want = pipeline.post_decode(sampled(pipeline, 5))
    assert max_diff(pixels(pipeline.post_decode(good)), pixels(want)) == 0


class _OwnDecode(ZImageStepPipeline):
    """A subclass that changes `post_decode` alone (as a rank's pipeline does for latents)."""

    def post_decode(self, state: ZImageRequest, /) -> Any:
        return ("own", super().post_decode(state))


def test_a_subclass_changing_post_decode_alone_decodes_one_by_one(
    pipeline: ZImageStepPipeline,
) -> None:
    custom = copy.copy(pipeline)
    custom.__class__ = _OwnDecode
    state = sampled(pipeline, 7)
    assert custom.decode_key(state) is None
    assert pipeline.decode_key(state) is not None
