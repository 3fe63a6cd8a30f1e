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
