"""FLUX.2 klein and dev split across 2 gloo ranks by cache-dit (INLINE_PROFILE=cpu, ulysses=2,
through the family's context plan), on the run's shared group, rebuilt in each rank by the shared
rank loader (`engine/remote.py`): the take equals the in-process take, with and without a
reference image, and each rank's attention really saw half the tokens. Dev renders at two
guidances sent at once share the split's forwards, one embedded guidance per row (one row with
the Turbo LoRA), and each equals its render alone in process.

Tolerance: at most one level (of 255), on at most 0.1% of the values. Each rank's matmuls run over
its half of the tokens, and oneDNN picks its blocking, hence the order it sums a dot product's
floats in, by the matrix's shape: a value on a rounding boundary may move by one level (the text
render comes out exact here; with a reference image the shapes differ)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from parallel_support import at_once, group_config
from PIL import Image
from zimage_support import CPU_DTYPES, rank_threads

from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.flux2 import Flux2Family
from inline_core.families.flux2.kit import Flux2Kit, build_kit
from inline_core.families.flux2.kit_dev import Flux2DevKit, build_dev_kit
from inline_core.families.flux2.pipeline import Flux2StepPipeline
from inline_core.models.catalog import Catalog
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.runner import resolve
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob, StepLoopSampler

MODEL = "flux2_klein_base_tiny.safetensors"
TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values
KW: dict[str, Any] = {"prompt": "a red fox", "width": 64, "height": 64, "steps": 3, "seed": 7}
REFERENCE = Image.fromarray(np.random.default_rng(5).integers(0, 255, (64, 80, 3), dtype=np.uint8))

pytestmark = pytest.mark.worker_group(shared="cache-dit")


@pytest.fixture(scope="module")
def flux2_models(tmp_path_factory: pytest.TempPathFactory) -> Flux2Kit:
    return build_kit(tmp_path_factory.mktemp("flux2-split") / "models")


@pytest.fixture(scope="module")
def handle(flux2_models: Flux2Kit) -> GroupPipeline:
    """The server's handle on the kit's base model in the ranks, on CPU."""
    family = Flux2Family(Catalog(flux2_models.root), {})
    sources = family.resolve("bfl/flux-2", {"model": MODEL}).require()
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


def in_process(handle: GroupPipeline) -> Flux2StepPipeline:
    """The pipeline in this process, built by the loader (and spec) the ranks use."""
    spec = handle.remote_spec()
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, Flux2StepPipeline)
    return pipeline


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> Flux2StepPipeline:
    return in_process(handle)


@pytest.fixture(scope="module")
def sampler(cache_dit_group: ParallelSampler) -> ParallelSampler:
    return cache_dit_group


@pytest.fixture
def threads() -> Iterator[None]:
    """The in-process render at the ranks' thread count: oneDNN's float reductions depend on it."""
    before = torch.get_num_threads()
    torch.set_num_threads(rank_threads(group_config()))
    yield
    torch.set_num_threads(before)


def assert_close(got: object, expected: object) -> None:
    assert isinstance(got, Image.Image) and isinstance(expected, Image.Image), got
    assert got.size == expected.size == (64, 64)
    difference = np.abs(np.asarray(got, dtype=np.int16) - np.asarray(expected, dtype=np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING


@pytest.mark.parametrize(
    "extra",
    [pytest.param({}, id="text"), pytest.param({"image": REFERENCE}, id="reference")],
)
def test_split_take_equals_in_process_take(
    local: Flux2StepPipeline,
    handle: GroupPipeline,
    sampler: ParallelSampler,
    threads: None,
    extra: dict[str, Any],
) -> None:
    kw = {**KW, "guidance": 3.0, "guided": True, **extra}
    probe = AttentionProbe(local.transformer)
    loop = StepLoopSampler()
    try:
        expected = loop.run(SampleJob(pipeline=local, state=local.request(**kw)))
        whole = list(probe.first_forward)
    finally:
        probe.remove()
        loop.close()
    got = sampler.run(SampleJob(pipeline=handle, state=handle.request(**kw)))
    assert_close(got, expected)
    meta = sampler.last_meta
    assert whole and all(n % 2 == 0 for n in whole)
    for rank in (0, 1):
        assert meta[rank]["engine"] == "cache-dit"
        assert meta[rank]["attentionTokens"] == [n // 2 for n in whole]
        assert meta[rank]["forwards"] == 3


# FLUX.2 dev: the same transformer class with a guidance embedder, read by a Mistral. Its stack
# differs from klein's, so the shared group's ranks load it once in place of klein's (the group
# holds one pipeline): the dev case runs after klein's, at the module's end.
DEV_MODEL = "flux2_dev_tiny.safetensors"  # ComfyUI's layout: BFL naming, the pruned Mistral
DEV_RENDERS: list[dict[str, Any]] = [
    {"prompt": "a lighthouse at dusk", "seed": 3, "guidance": 1.5},
    {"prompt": "a red fox", "seed": 4, "guidance": 5.0},
]


@pytest.fixture(scope="module")
def dev_kit(tmp_path_factory: pytest.TempPathFactory) -> Flux2DevKit:
    return build_dev_kit(tmp_path_factory.mktemp("flux2-dev-split") / "models", ("comfy",))


def turbo(kit: Flux2DevKit) -> tuple[LoraUse, ...]:
    """The kit's Turbo-like LoRA (every layer, BFL's naming), as a request's stack."""
    path = kit.loras["turbo"]
    return (LoraUse(path.name, str(path), f"{path.name}:{path.stat().st_mtime_ns}", 1.0),)


@pytest.fixture(scope="module")
def dev_handle(dev_kit: Flux2DevKit) -> GroupPipeline:
    family = Flux2Family(Catalog(dev_kit.root), {})
    sources = family.resolve("bfl/flux-2", {"model": DEV_MODEL}).require()
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


@pytest.fixture(scope="module")
def dev_local(dev_handle: GroupPipeline) -> Flux2StepPipeline:
    return in_process(dev_handle)


@pytest.mark.parametrize(
    "extra",
    [pytest.param({}, id="text"), pytest.param({"image": REFERENCE}, id="reference")],
)
def test_dev_split_takes_with_guidance_per_row_equal_in_process_takes(
    dev_kit: Flux2DevKit,
    dev_handle: GroupPipeline,
    dev_local: Flux2StepPipeline,
    sampler: ParallelSampler,
    threads: None,
    extra: dict[str, Any],
) -> None:
    """Two dev renders at different guidances sent at once share the split's forwards (one
    guidance per row of the batch; the second with the Turbo LoRA, which adapts the embedders
    and modulations too), and each take equals its render alone in process."""
    local = dev_local
    common = {"width": 64, "height": 64, "steps": 3, **extra}
    renders = [DEV_RENDERS[0], {**DEV_RENDERS[1], "loras": turbo(dev_kit)}]
    jobs = [SampleJob(dev_handle, dev_handle.request(**common, **r)) for r in renders]
    outputs = at_once(sampler, jobs)
    assert sampler.stats()["rankLoop"]["batchedForwards"] > 0  # one forward, two guidances
    probe = AttentionProbe(local.transformer)
    try:
        for output, render in zip(outputs, renders, strict=True):
            state = local.request(**common, **render)
            assert state.embedded_guidance and not state.cfg
            loop = StepLoopSampler()
            try:
                expected = loop.run(SampleJob(pipeline=local, state=state))
            finally:
                loop.close()
            assert_close(output, expected)
        whole = list(probe.first_forward)
    finally:
        probe.remove()
    first, second = (np.asarray(o, dtype=np.int16) for o in outputs)
    assert int(np.abs(first - second).max()) > TOLERANCE  # each row got its own picture
    assert whole and all(n % 2 == 0 for n in whole)
    for rank in (0, 1):
        assert sampler.last_meta[rank]["engine"] == "cache-dit"
        assert sampler.last_meta[rank]["attentionTokens"] == [n // 2 for n in whole]
