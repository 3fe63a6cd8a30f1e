"""Wan split across 2 gloo ranks by cache-dit (INLINE_PROFILE=cpu, INLINE_PARALLEL=ulysses=2),
through the family's node runner: each variant's take (frames, format png) equals the take the same
render makes in process, LoRAs (one on `proj_out`, the layer whose output the split gathers) and
the step cache included, and each rank's attention really saw half the tokens, on both experts of
an A14B pair.

Tolerance: at most one level (of 255), on at most 0.1% of the values. Each rank's matmuls run over
its half of the tokens (and TI2V embeds its half of the per-token timesteps), and oneDNN picks its
blocking, hence the order it sums a dot product's floats in, by the matrix's shape: a value that
lies on a rounding boundary may move by one level. Most renders here come out exact.

The runtime's group is the run's shared cache-dit one (`tests/worker_groups.py`): the split,
runner and engine the runtime launches itself, its ranks loading Wan's stacks in place.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from inline_core.contract.registry import Families
from inline_core.device.split import ParallelSpec
from inline_core.engine.group import ModelGroup
from inline_core.families.nodes.loras import LoraPicker
from inline_core.families.standalone import FamilyRig
from inline_core.families.wan.kit import WanKit, build_kit
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.probe import AttentionProbe
from inline_core.parallel.protocol import Json
from inline_core.parallel.sampler import ParallelSampler
from inline_core.parallel.settings import RankSettings
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.sampling.loop import StepLoopSampler
from tests.families.wan.wan_harness import PROMPT, node_params, take_frames, wan_rig

SPLIT = ParallelSpec.parse("ulysses=2")
TOLERANCE = 1  # levels of 255
MAX_DIFFERING = 0.001  # of the values
# Reuses steps: warmup 2, then at most 2 reused in a row (the Wan step cache tests' LOOSE).
LOOSE = StepCacheSettings(threshold=0.5, warmup=2, front_blocks=1, max_consecutive=2)
_runs = itertools.count()


pytestmark = pytest.mark.worker_group(shared="cache-dit", stack="wan kit")


@pytest.fixture(scope="module")
def wan_models(tmp_path_factory: pytest.TempPathFactory) -> WanKit:
    """The tiny Wan models the split renders: 2.1 t2v (its LoRAs), TI2V, A14B i2v, 2.1 i2v."""
    out = tmp_path_factory.mktemp("wan-split") / "models"
    return build_kit(out, layouts=("comfy",), variants=("t2v", "ti2v", "a14b_i2v", "i2v"))


@pytest.fixture(scope="module")
def local(wan_models: WanKit) -> Iterator[FamilyRig]:
    """Renders in process, at a rank's thread count: oneDNN's float reductions depend on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(GroupConfig(RankSettings(split=SPLIT)).rank_threads())
    sampler = StepLoopSampler()  # its loop thread takes the count above at its first op
    rig = wan_rig(wan_models.root, sampler)
    yield rig
    rig.close()
    sampler.close()
    torch.set_num_threads(threads)


class _SharedModelGroup(ModelGroup):
    """The runtime's group on the run's shared sampler: the run closes it after its last module
    (and checks that nothing of it is left), not the runtime that renders on it here."""

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def split(wan_models: WanKit, cache_dit_group: ParallelSampler) -> Iterator[FamilyRig]:
    """The same family on a runtime whose policy splits Wan over 2 CPU ranks, on the run's
    shared group of that split in place of one the runtime would launch for this module."""

    def shared_group(chosen: ParallelSpec, *, cuda: bool) -> ModelGroup:
        assert chosen == cache_dit_group.config.ranks.split and not cuda
        return _SharedModelGroup(chosen, cache_dit_group)

    sampler = StepLoopSampler()  # never used: every render goes to the worker group
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ModelGroup, "for_split", shared_group)
        rig = wan_rig(wan_models.root, sampler, parallel=str(SPLIT))
        yield rig
        rig.close()
    sampler.close()


def render(
    rig: FamilyRig,
    takes: Path,
    *,
    inputs: dict[str, Any] | None = None,
    cache: StepCacheChoice | None = None,
    **params: Any,
) -> NodeResult:
    ctx = ExecutionContext(
        run_id=f"wan-split{next(_runs)}",
        takes=FileTakeStore(takes),
        step_cache=cache or StepCacheChoice(),
    )
    call = NodeCall(
        ctx=ctx,
        node_id="w",
        params=node_params(**params),
        inputs={"prompt": PROMPT, **(inputs or {})},
    )
    return rig.run(call)


def rank_meta(rig: FamilyRig) -> dict[int, dict[str, Json]]:
    """Each rank's counters of the group's last job."""
    return rig.runtime.group(SPLIT).sampler.last_meta


def assert_same_take(alone: NodeResult, split: NodeResult) -> None:
    (take,), (split_take,) = alone.takes, split.takes
    assert take.params == split_take.params
    frames, split_frames = take_frames(alone), take_frames(split)
    assert frames.shape == split_frames.shape
    difference = np.abs(frames - split_frames)
    assert int(difference.max()) <= TOLERANCE
    assert float((difference > 0).mean()) <= MAX_DIFFERING


def test_loras_and_the_step_cache_split_as_in_process(
    wan_models: WanKit, local: FamilyRig, split: FamilyRig, tmp_path: Path
) -> None:
    """Two LoRAs, `b` on `proj_out` among others (its delta is computed on the whole gathered
    input on each rank), and DBCache deciding on all-reduced sums: the same take, the same steps
    reused."""
    stack = [(wan_models.loras["a"].name, 1.0), (wan_models.loras["b"].name, 0.5)]

    def loras(rig: FamilyRig) -> dict[str, Any]:
        picker = LoraPicker(Families([rig.family]), rig.catalog)
        return {"loras": [picker.pick({"name": name, "strength": s}) for name, s in stack]}

    kw: dict[str, Any] = {"steps": 8, "guidance": 3.0, "cache": StepCacheChoice(True, LOOSE)}
    alone = render(local, tmp_path / "alone", inputs=loras(local), **kw)
    got = render(split, tmp_path / "split", inputs=loras(split), **kw)
    assert_same_take(alone, got)
    counts = got.takes[0].params["cacheCounts"]
    assert counts == alone.takes[0].params["cacheCounts"] and counts["reusedSteps"] > 0
    assert [rank_meta(split)[rank]["engine"] for rank in (0, 1)] == ["cache-dit", "cache-dit"]


def _image() -> Image.Image:
    pixels = np.random.default_rng(3).integers(0, 255, (32, 64, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


# (model file, params, with an image): each variant's forward as the plan shards it.
VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "t2v": ("wan2.1_t2v_tiny_fp32.safetensors", {}, False),
    # Per-token timesteps, sharded with the tokens; the image stands as the first latent frame.
    "ti2v-image": ("wan2.2_ti2v_tiny_fp32.safetensors", {"width": 64}, True),
    # The pair: the high-noise expert's first step, then the low-noise one's (both split).
    "a14b-i2v": ("wan2.2_i2v_high_noise_tiny_fp32.safetensors", {"switch_step": 1}, True),
    # 257 CLIP image tokens before the prompt's 512 in cross-attention (never sharded).
    "i2v-clip": ("wan2.1_i2v_tiny_fp32.safetensors", {}, True),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_split_take_equals_the_in_process_take(
    variant: str, local: FamilyRig, split: FamilyRig, tmp_path: Path
) -> None:
    model, extra, with_image = VARIANTS[variant]
    params: dict[str, Any] = {"model": model, "guidance": 3.0, "format": "png", **extra}
    inputs = {"image": _image()} if with_image else {}
    pipeline = local.pipeline(model)
    experts = [m for m in (pipeline.transformer, pipeline.transformer_2) if m is not None]
    probes = [AttentionProbe(expert) for expert in experts]
    try:
        alone = render(local, tmp_path / "alone", inputs=inputs, **params)
    finally:
        for probe in probes:
            probe.remove()
    first, last = probes[0].first_forward, probes[-1].last_forward  # the last: the low expert's
    got = render(split, tmp_path / "split", inputs=inputs, **params)
    assert_same_take(alone, got)
    # A real split: every attention layer of each rank saw half of what one process saw, on
    # the first forward and on the last (an A14B pair's other expert).
    assert first and last and all(n % 2 == 0 for n in first + last)
    meta = rank_meta(split)
    for rank in (0, 1):
        assert meta[rank]["engine"] == "cache-dit"
        assert meta[rank]["forwards"] == 3
        assert meta[rank]["attentionTokens"] == [n // 2 for n in first]
        assert meta[rank]["lastAttentionTokens"] == [n // 2 for n in last]
