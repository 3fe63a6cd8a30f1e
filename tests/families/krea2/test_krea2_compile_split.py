"""Krea 2 under `--compile` with a split: where the server compiles, its rank spec carries the
choice and each rank (4 gloo ranks, Ring over Ulysses groups: the Ulysses all-to-alls and the
masked ring attention inside the compiled blocks) compiles the transformer's repeated blocks
(`Krea2TransformerBlock`, diffusers' `_repeated_blocks`) as the generic mechanism does for every
family (`diffusion/compile/`, `tests/parallel/test_parallel_compile.py`); the take equals the
in-process eager take within FLUX.2's tolerance, and the job says every rank ran the blocks
compiled.

It renders on Qwen-Image's USP group (`qwen-ring`, `tests/worker_groups.py`; its ranks load this
compiled stack in place of the last one), so it starts no group of its own: one compile covers
both Ulysses and Ring. Its heartbeat deadline (10 s for four ranks, `split_group_config`) holds
for ranks busy compiling (dynamo traces in Python), where the two-rank groups' 3 s may not on a
loaded CPU."""

from __future__ import annotations

import pytest
from krea2_split_harness import GUIDED, KW, alone, assert_close

from inline_core.device.compile import CompileChoice
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.families.krea2.pipeline import Krea2StepPipeline
from inline_core.models.catalog import Catalog
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob
from tests.families.split_take_harness import USP, ring_group
from tests.parallel.zimage_support import CPU_DTYPES

pytestmark = pytest.mark.worker_group(shared=USP)

COMPILED = {"denoiser": CompileChoice(True, "test"), "vae": CompileChoice(False, "test")}


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return ring_group(request, USP)


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
    assert dict(group.config.ranks.split.degrees) == {"ulysses": 2, "ring": 2}
    assert job.compiled == [{"block": "Krea2TransformerBlock", "ran": "compiled", "ranks": 4}]
    assert all(group.last_meta[rank]["engine"] == "cache-dit" for rank in range(4))
