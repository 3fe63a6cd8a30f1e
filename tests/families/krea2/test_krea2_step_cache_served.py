"""The `krea/krea-2` node serves a run's step cache (`options.cache`): the family declares DBCache,
the node hands the run's settings to its request, and the take records them and what was reused."""

from __future__ import annotations

import itertools
from pathlib import Path

from krea2_harness import rig, to_pixels

from inline_core.families.krea2.descriptor import KREA2_DESCRIPTOR
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice
from inline_core.sampling.loop import StepLoopSampler
from tests.families.step_cache_harness import check_served_step_cache

_runs = itertools.count()


def test_the_node_serves_the_runs_step_cache(
    krea2_kit: Krea2Kit, krea_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    node = rig(krea2_kit, krea_sampler)
    assert node.family.describe()["stepCache"] == ["dbcache"]
    defaults = {p.name: p.default for p in KREA2_DESCRIPTOR.params}
    params = {**defaults, "model": "krea2_tiny.safetensors", "width": 48, "height": 48}
    params.update(steps=6, guidance=2.0, seed=7)

    def run(choice: StepCacheChoice) -> NodeResult:
        takes = FileTakeStore(tmp_path)
        ctx = ExecutionContext(run_id=f"cache{next(_runs)}", takes=takes, step_cache=choice)
        return node.run(NodeCall(ctx=ctx, node_id="k", params=params, inputs={"prompt": "a kite"}))

    check_served_step_cache(run, lambda result: to_pixels(result.takes[0].path))
