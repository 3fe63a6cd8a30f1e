"""Krea 2 under `--compile` with a split: where the server compiles, its rank spec carries the
choice and each rank (2 gloo ranks, Ring: the masked ring attention inside the compiled blocks)
compiles the transformer's repeated blocks (`Krea2TransformerBlock`, diffusers'
`_repeated_blocks`) as the generic mechanism does for every family (`diffusion/compile/`,
`tests/parallel/test_parallel_compile.py`); the take equals the in-process eager take within
FLUX.2's tolerance, and the job says both ranks ran the blocks compiled.

Its group is its own: a rank busy compiling (dynamo traces in Python) can miss the shared groups'
3 s heartbeat deadline on a loaded CPU, so its deadline is the server's order (60 s here)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from krea2_split_harness import GUIDED, KW, alone, assert_close

from inline_core.device.compile import CompileChoice
from inline_core.device.split import ParallelSpec
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.models.catalog import Catalog
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob
from tests.parallel.parallel_support import split_group_config
from tests.parallel.zimage_support import CPU_DTYPES

pytestmark = pytest.mark.worker_group  # its own group (see above)

RING = ParallelSpec.parse("ring=2")
COMPILED = {"denoiser": CompileChoice(True, "test"), "vae": CompileChoice(False, "test")}


@pytest.fixture(scope="module")
def group() -> Iterator[ParallelSampler]:
    config = replace(split_group_config(RING, DEFAULT_RUNNER), heartbeat_timeout_s=60.0)
    sampler = ParallelSampler(config, retries=0)
    try:
        yield sampler
    finally:
        sampler.close()


def compiled_handle(kit: Krea2Kit) -> GroupPipeline:
    """The handle a server that compiles sends: the same stack, its denoiser's blocks compiled."""
    family = Krea2Family(Catalog(kit.root), {})
    sources = family.resolve(NODE_TYPE, {"model": "krea2_tiny.safetensors"}).require()
    spec = rank_spec(family, "node", sources, CPU_DTYPES, COMPILED)
    return GroupPipeline(family, spec, "node", sources)


def test_the_ranks_compile_krea2s_blocks_and_render_the_in_process_take(
    krea2_kit: Krea2Kit, local: Krea2StepPipeline, group: ParallelSampler
) -> None:
    handle = compiled_handle(krea2_kit)
    assert handle.remote_spec().args["compile"] == {"denoiser": COMPILED["denoiser"].to_json()}
    expected, _whole, _state = alone(local, GUIDED)  # eager, at a rank's thread count
    job = SampleJob(handle, handle.request(**{**KW, **GUIDED}))
    assert_close(group.run(job), expected)
    assert job.compiled == [{"block": "Krea2TransformerBlock", "ran": "compiled", "ranks": 2}]
    assert all(group.last_meta[rank]["engine"] == "cache-dit" for rank in (0, 1))
