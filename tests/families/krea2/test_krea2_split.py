"""Krea 2 split across 2 gloo ranks by cache-dit's Krea 2 planner (INLINE_PROFILE=cpu,
ulysses=2), on the run's shared cache-dit group (`tests/worker_groups.py`), the pipeline rebuilt
in each rank by the shared rank loader: the take equals the in-process take, guided (a prompt and
its negative in one forward) and unguided; renders sent at once share the split's forwards and
each equals its render alone; each rank's transformer blocks attended over half the joint
sequence (the text fusion over the whole prompt); image tokens the ranks cannot share are refused
on the ranks in words, before the transformer, and the group serves the next render.

Tolerance, as FLUX.2's and Qwen-Image's split tests: at most one level (of 255), on at most 0.1%
of the values (each rank's matmuls run over its half of the tokens; oneDNN's blocking, hence the
order of its float sums, follows the shapes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.errors import InvalidRequest
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import TEXT_LAYERS, TRANSFORMER_CONFIG, Krea2Kit
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.families.krea2.request import TEXT_TOKENS, Krea2Request
from inline_core.models.catalog import Catalog
from inline_core.parallel.errors import RemoteJobError
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.runner import DEFAULT_RUNNER, resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob, StepLoopSampler
from tests.families.step_cache_harness import LOOSE
from tests.parallel.parallel_support import at_once, group_config
from tests.parallel.zimage_support import CPU_DTYPES, rank_threads
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="cache-dit")

MODEL = "krea2_tiny.safetensors"
TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values
KW: dict[str, Any] = {"width": 64, "height": 48, "steps": 2, "text_layers": TEXT_LAYERS}


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return shared_sampler(
        request, "cache-dit", lambda: ParallelSampler(group_config(DEFAULT_RUNNER), retries=1)
    )


@pytest.fixture(scope="module")
def handle(krea2_kit: Krea2Kit) -> GroupPipeline:
    """The server's handle on the kit's model in the ranks, on CPU."""
    family = Krea2Family(Catalog(krea2_kit.root), {})
    sources = family.resolve(NODE_TYPE, {"model": MODEL}).require()
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline, group: ParallelSampler) -> Iterator[Krea2StepPipeline]:
    """The pipeline in this process, built by the loader (and spec) the ranks use, stepped at a
    rank's thread count (oneDNN's float reductions depend on it)."""
    spec = handle.remote_spec()
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, Krea2StepPipeline)
    threads = torch.get_num_threads()
    torch.set_num_threads(rank_threads(group.config))
    yield pipeline
    torch.set_num_threads(threads)


def alone(
    pipeline: Krea2StepPipeline, render: dict[str, Any]
) -> tuple[Image.Image, list[int], Krea2Request]:
    """The in-process take of `render`, the tokens each attention layer saw in its first
    forward, and the request's state."""
    probe = AttentionProbe(pipeline.transformer)
    loop = StepLoopSampler()
    state = pipeline.request(**{**KW, **render})
    try:
        image = loop.run(SampleJob(pipeline, state))
    finally:
        loop.close()
        probe.remove()
    assert isinstance(image, Image.Image)
    return image, list(probe.first_forward), state


def assert_close(got: object, expected: Image.Image) -> None:
    assert isinstance(got, Image.Image), got
    assert got.size == expected.size == (KW["width"], KW["height"])
    difference = np.abs(np.asarray(got, np.int16) - np.asarray(expected, np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING


def assert_split_halves(group: ParallelSampler, whole: list[int]) -> None:
    """Each rank ran on cache-dit, and its blocks' attention saw half of the joint sequence
    (the prompt's 512 tokens and the image's) where one process saw it whole; the text fusion
    runs whole on every rank."""
    joint = TEXT_TOKENS + (KW["width"] // 16) * (KW["height"] // 16)
    assert whole.count(joint) == TRANSFORMER_CONFIG["num_layers"]  # each block, whole here
    shares = [n // 2 if n == joint else n for n in whole]
    for rank in (0, 1):
        assert group.last_meta[rank]["engine"] == "cache-dit"
        assert group.last_meta[rank]["attentionTokens"] == shares


@pytest.mark.parametrize(
    "render",
    [
        pytest.param({"prompt": "a red fox", "seed": 7, "guidance": 4.0}, id="guided"),
        pytest.param({"prompt": "a kite", "seed": 3, "guidance": 0.0}, id="unguided"),
        # the step cache deciding on sums all-reduced over the ranks' halves
        pytest.param(
            {"prompt": "a kite", "seed": 3, "guidance": 2.0, "steps": 6, "step_cache": LOOSE},
            id="step cache",
        ),
    ],
)
def test_a_split_take_equals_the_in_process_take(
    local: Krea2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    expected, whole, state = alone(local, render)
    remote = handle.request(**{**KW, **render})
    got = group.run(SampleJob(handle, remote))
    assert_close(got, expected)
    assert_split_halves(group, whole)
    if "step_cache" in render:  # every rank decided as the one process did
        assert state.cache.stats()["reusedSteps"] > 0
        assert remote.cache.stats() == state.cache.stats()


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
    assert_split_halves(group, singles[-1][1])


def test_a_rank_refuses_image_tokens_it_cannot_share_in_words(
    handle: GroupPipeline, group: ParallelSampler
) -> None:
    """A render the submit check would have refused, sent to the ranks directly: each refuses it
    before the transformer with the cause and the fix, not cache-dit's exchange of unequal
    shards, and the group renders the next one."""
    odd = {**KW, "width": 48, "height": 48, "prompt": "a fox", "seed": 1, "guidance": 0.0}
    with pytest.raises(RemoteJobError) as refused:
        group.run(SampleJob(handle, handle.request(**odd)))
    assert (refused.value.status, refused.value.code) == (422, InvalidRequest.code)
    why = refused.value.message
    assert why.startswith("48x48 is 9 image tokens for Krea 2 (3x3 patches of 16 px)")
    assert "the 2 ranks of this server's split (INLINE_PARALLEL)" in why
    assert "a side of a multiple of 32 px fits" in why
    fine = {**KW, "prompt": "a fox", "seed": 1, "guidance": 0.0}
    assert isinstance(group.run(SampleJob(handle, handle.request(**fine))), Image.Image)
