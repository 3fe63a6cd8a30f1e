"""FLUX.2 klein split across 2 gloo ranks by cache-dit (INLINE_PROFILE=cpu, ulysses=2), on the
run's shared group, rebuilt in each rank by the shared rank loader (`engine/remote.py`): the take
equals the in-process take, with and without a reference image, and each rank's attention really
saw half the tokens.

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
from parallel_support import group_config
from PIL import Image
from zimage_support import CPU_DTYPES, rank_threads

from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.flux2 import Flux2Family
from inline_core.families.flux2.kit import Flux2Kit, build_kit
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


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> Flux2StepPipeline:
    """The pipeline in this process, built by the loader (and spec) the ranks use."""
    spec = handle.remote_spec()
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, Flux2StepPipeline)
    return pipeline


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
    assert isinstance(got, Image.Image) and isinstance(expected, Image.Image)
    assert got.size == expected.size == (64, 64)
    difference = np.abs(np.asarray(got, dtype=np.int16) - np.asarray(expected, dtype=np.int16))
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING
    meta = sampler.last_meta
    assert whole and all(n % 2 == 0 for n in whole)
    for rank in (0, 1):
        assert meta[rank]["engine"] == "cache-dit"
        assert meta[rank]["attentionTokens"] == [n // 2 for n in whole]
        assert meta[rank]["forwards"] == 3
