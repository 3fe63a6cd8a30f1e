"""A worker group's ranks pack their own denoiser's linear weights for oneDNN at load
(`engine/packing.py`, `diffusion/packed_linear.py`) where the server's device policy packs: the
render target asks the policy as in process (`engine/target.py`), each rank reports its packed
bytes, and a split render of the tiny Z-Image kit in bfloat16 on the shared 2-rank cache-dit
group equals the same split render unpacked (`--no-compile`) bit for bit, with a LoRA stack too
(per row on the ranks: a hook on each packed layer's output) that still changes the picture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from zimage_support import kit_family, kit_lora, load_spec

from inline_core.config import Config
from inline_core.diffusion.packed_linear import PackedLinear, packed_bytes
from inline_core.engine.group import GroupPipeline
from inline_core.engine.runtime import ModelRuntime
from inline_core.engine.target import node_target
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob, StepLoopSampler

pytestmark = [
    pytest.mark.worker_group(shared="cache-dit", stack="z-image kit packed"),
    pytest.mark.skipif(
        not cast(Any, torch.ops.mkldnn)._is_mkldnn_bf16_supported(),
        reason="oneDNN's bfloat16 matmul needs AVX512 (the packed layers are only made there)",
    ),
]
KW: dict[str, Any] = {
    "prompt": "a red fox",
    "width": 64,
    "height": 64,
    "steps": 4,
    "seed": 7,
    "guidance": 0.0,
}
PACKED_OP = "mkldnn::_linear_pointwise"  # a linear layer computing from its packed weight


@pytest.fixture(scope="module")
def sampler(cache_dit_group: ParallelSampler) -> ParallelSampler:
    return cache_dit_group


def _handle(kit: KitPaths, data: Path, **config: Any) -> Iterator[GroupPipeline]:
    """The server's handle on the kit's stack split in two ranks, from the render target a
    server on the CPU profile in bfloat16 picks (no group is launched here)."""
    settings = Config(
        models_dir=kit.root,
        data_dir=data,
        profile="cpu",
        dtype="bfloat16",
        parallel="ulysses=2",
        **config,
    )
    loop = StepLoopSampler()
    runtime = ModelRuntime(settings, loop)
    try:
        family = kit_family(kit.root)
        target = node_target(runtime, family, family.files.resolve().require())
        assert not target.in_process and isinstance(target.pipeline, GroupPipeline)
        yield target.pipeline
    finally:
        runtime.close()
        loop.close()


@pytest.fixture(scope="module")
def packed(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupPipeline]:
    yield from _handle(kit, tmp_path_factory.mktemp("packed"))


@pytest.fixture(scope="module")
def plain(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupPipeline]:
    yield from _handle(kit, tmp_path_factory.mktemp("plain"), no_compile=True)


def _render(sampler: ParallelSampler, handle: GroupPipeline, **kw: Any) -> np.ndarray[Any, Any]:
    got = sampler.run(SampleJob(pipeline=handle, state=handle.request(**KW, **kw)))
    return np.asarray(got, dtype=np.int16)


def _forward_ops(pipeline: ZImageStepPipeline) -> set[str]:
    """The operators one denoiser forward of `pipeline` runs (on this thread)."""
    state = pipeline.request(**KW)
    state = pipeline.prepare_encode(state) or state
    with torch.profiler.profile() as profile:
        pipeline.denoise_step([state])
    events = cast(list[Any], list(profile.key_averages()))
    return {str(event.key) for event in events}


def _ranks_packed(sampler: ParallelSampler) -> list[int]:
    """Each rank's packed bytes, as health's worker group shows them after a job."""
    return [row["bytes"] for row in sampler.stats()["packedLinear"]]


def test_ranks_pack_as_the_policy_says_and_render_the_same_pixels(
    packed: GroupPipeline, plain: GroupPipeline, sampler: ParallelSampler
) -> None:
    budget = cast(dict[str, Any], packed.spec.args["packed"])["budgetBytes"]
    assert isinstance(budget, int) and budget > 0  # each rank's share of the memory budget
    assert "packed" not in plain.spec.args  # `--no-compile`: the ranks are not told to pack
    local = load_spec(packed.spec)  # the rank's loader, in process
    wanted = packed_bytes(local.denoiser.transformer)
    assert wanted > 0 and any(type(m) is PackedLinear for m in local.denoiser.transformer.modules())
    assert PACKED_OP in _forward_ops(local)  # its forward reads the packed copies

    theirs = _render(sampler, plain)
    assert _ranks_packed(sampler) == [0, 0]
    ours = _render(sampler, packed)
    assert _ranks_packed(sampler) == [wanted, wanted]  # every rank packed its own
    assert np.array_equal(ours, theirs)  # the same kernel, the same sums: bit for bit


def test_a_lora_stack_on_packed_ranks_renders_as_on_unpacked_ones(
    kit: KitPaths, packed: GroupPipeline, plain: GroupPipeline, sampler: ParallelSampler
) -> None:
    loras = (kit_lora(kit, "a", 0.8), kit_lora(kit, "b", 0.5))
    theirs = _render(sampler, plain, loras=loras)
    ours = _render(sampler, packed, loras=loras)
    assert _ranks_packed(sampler)[0] > 0
    assert np.array_equal(ours, theirs)
    bare = _render(sampler, packed)
    assert int(np.abs(ours - bare).max()) > 10  # the stack applies on the packed layers
