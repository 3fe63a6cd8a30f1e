"""The `bfl/flux-2` node serves a run's step cache (`options.cache`): the family declares DBCache,
the node hands the run's settings to its request, and the take records them and what was reused."""

from __future__ import annotations

import itertools
from pathlib import Path

from flux2_harness import make_rig, node_params, take_pixels

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import check_served_step_cache

# The tiny model's front residual moves by 1 to 1.8 from step to step (test_flux2_step_cache.py).
_runs = itertools.count()
LOOSE = StepCacheSettings(threshold=4.0, warmup=1, front_blocks=1, max_consecutive=2)


def test_the_node_serves_the_runs_step_cache(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = make_rig(flux2_kit.root, sampler)
    assert rig.family.describe()["stepCache"] == ["dbcache"]
    params = node_params(model="flux2_klein_base_tiny.safetensors", steps=6, guidance=3.0)

    def run(choice: StepCacheChoice) -> NodeResult:
        takes = FileTakeStore(tmp_path)
        ctx = ExecutionContext(run_id=f"cache{next(_runs)}", takes=takes, step_cache=choice)
        return rig.run(NodeCall(ctx=ctx, node_id="f", params=params, inputs={"prompt": "a kite"}))

    check_served_step_cache(run, take_pixels, LOOSE)
