"""Step caching through the Z-Image node: what the run asked for, else the device policy's
choice by step count, reaches the render, and the take's params record the settings used."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from zimage_harness import make_runner, node_params

from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.runner import NodeCall
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings
from inline_core.sampling.loop import StepLoopSampler
from inline_core.takes import Take

_ids = itertools.count()


def render(rig: FamilyRig, takes: Path, choice: StepCacheChoice, **params: Any) -> Take:
    ctx = ExecutionContext(
        run_id=f"cache{next(_ids)}", takes=FileTakeStore(takes), step_cache=choice
    )
    call = NodeCall(ctx=ctx, node_id="z", params=node_params(**params), inputs={"prompt": "fox"})
    (take,) = rig.run(call).takes
    return take


def take_pixels(take: Take) -> Any:
    with Image.open(take.path) as png:
        return np.asarray(png.convert("RGB"), dtype=np.int16)


@pytest.fixture(scope="module")
def rig(kit: KitPaths) -> Any:
    sampler = StepLoopSampler()
    yield make_runner(kit.root, sampler)
    sampler.close()


def test_the_policy_caches_from_20_steps_and_the_take_records_it(rig: Any, tmp_path: Path) -> None:
    turbo = render(rig, tmp_path, StepCacheChoice(), steps=8)
    assert "cache" not in turbo.params  # the 8-step Turbo: off
    long = render(rig, tmp_path, StepCacheChoice(), steps=20)
    assert long.params["cache"] == StepCacheSettings().to_json()
    off = render(rig, tmp_path, StepCacheChoice(True, None), steps=20)
    assert "cache" not in off.params  # {"method": "none"} wins over the policy


def test_a_runs_own_settings_reach_the_render_and_its_take(rig: Any, tmp_path: Path) -> None:
    never = StepCacheSettings(threshold=0.0, warmup=0, front_blocks=1)
    asked = render(rig, tmp_path, StepCacheChoice(True, never), steps=6)
    assert asked.params["cache"] == never.to_json()
    plain = render(rig, tmp_path, StepCacheChoice(True, None), steps=6)
    assert np.array_equal(take_pixels(asked), take_pixels(plain))
    # A threshold the kit's residuals pass (they move 0.6-1.0 a step) reuses: other pixels.
    loose = StepCacheSettings(threshold=0.97, warmup=1, front_blocks=1)
    reused = render(rig, tmp_path, StepCacheChoice(True, loose), steps=6)
    assert reused.params["cache"]["threshold"] == 0.97
    assert not np.array_equal(take_pixels(reused), take_pixels(plain))
    # Each take says what its cache did: six steps, one row, two main blocks a step.
    assert asked.params["cacheCounts"] == {
        "computedSteps": 6,
        "reusedSteps": 0,
        "skippedBlocks": 0,
        "computedBlocks": 12,
    }
    assert reused.params["cacheCounts"]["reusedSteps"] > 0
    assert "cacheCounts" not in plain.params


def test_cached_requests_with_their_own_loras_share_forwards_and_render_as_alone(
    kit: KitPaths,
) -> None:
    """Rows that compute their middle blocks run them as a sub-batch, and each keeps its own
    LoRA there (the per-row plan narrowed to the sub-batch): four requests with different
    stacks and settings render what each renders alone."""
    from lora_harness import Stack, picks

    from inline_core.sampling.job import SampleJob

    sampler = StepLoopSampler()
    try:
        rig = make_runner(kit.root, sampler)
        pipeline: Any = rig.pipeline()
        specs: list[tuple[Stack, StepCacheSettings | None]] = [
            ([("a", 1.0)], StepCacheSettings(threshold=0.97, warmup=2, front_blocks=1)),
            ([("b", 1.0)], StepCacheSettings(threshold=0.9, warmup=1, front_blocks=1)),
            ([("a", 0.5), ("b", 1.5)], None),
            ([], StepCacheSettings(threshold=0.95, warmup=3, front_blocks=1, max_consecutive=1)),
        ]

        def state(index: int) -> Any:
            stack, cache = specs[index]
            loras = tuple(h.use for h in picks(rig, kit, stack))
            return pipeline.request(
                prompt="a fox",  # one prompt: rows of one length, no padding in between
                width=64,
                height=64,
                steps=10,
                guidance=0.0,
                seed=index,
                loras=loras,
                step_cache=cache,
            )

        alone_states = [state(i) for i in range(len(specs))]
        alone = [take_pixels_of(sampler.run(SampleJob(pipeline, s))) for s in alone_states]
        before = sampler.stats()
        states = [state(i) for i in range(len(specs))]
        futures = [sampler.submit(SampleJob(pipeline, s)) for s in states]
        together = [take_pixels_of(f.result(timeout=300)) for f in futures]
        after = sampler.stats()
    finally:
        sampler.close()
    assert after["batchedForwards"] > before["batchedForwards"]
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert int(np.abs(solo - batched).max()) <= 1, f"request {i}"
    for solo_state, batched_state in zip(alone_states, states, strict=True):
        if solo_state.cache is not None:
            assert solo_state.cache.stats() == batched_state.cache.stats()
    assert sum(s.cache.stats()["reusedSteps"] for s in states if s.cache is not None) > 0


def take_pixels_of(image: Image.Image) -> Any:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_the_sample_primitive_follows_the_run_and_its_decoded_take_says_so(
    kit: KitPaths, tmp_path: Path
) -> None:
    import random

    from primitive_graphs import make_rig, primitive_graph, ran_nodes

    from inline_core.graph.schema import parse_graph
    from inline_core.graph.validate import validate_graph
    from inline_core.runtime.progress import RunEvent

    sampler = StepLoopSampler()
    try:
        prims = make_rig(kit.root, sampler, tmp_path)
        graph = primitive_graph("a fox", steps=20)

        def run(choice: StepCacheChoice) -> tuple[Take, set[str]]:
            validated = validate_graph(
                parse_graph(graph), "decode", prims.registry, prims.catalog, rng=random.Random(0)
            )
            events: list[RunEvent] = []
            ctx = ExecutionContext(
                run_id=f"prim-cache{next(_ids)}",
                takes=FileTakeStore(prims.takes_dir),
                events=events.append,
                step_cache=choice,
            )
            (take,) = prims.executor.execute(validated, ctx).takes
            return take, ran_nodes(events)

        policy, _ = run(StepCacheChoice())
        assert policy.params["cache"] == StepCacheSettings().to_json()  # 20 steps: on
        assert policy.params["cacheCounts"]["computedSteps"] == 20  # warmup 8, threshold 0.08
        off, ran = run(StepCacheChoice(True, None))
        assert "cache" not in off.params
        assert ran == {"sample", "decode"}  # another key: sampled again, loaders reused
        _, ran = run(StepCacheChoice(True, None))
        assert ran == set()  # the same choice: the node cache serves it
    finally:
        sampler.close()
