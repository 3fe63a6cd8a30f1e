"""LoRA stacks on a split: 2 gloo ranks apply each request's stack (loaded by file on every rank)
and render what one process renders with the same stack; requests with different stacks share
forwards, and a LoRA the group has not seen loads in the ranks without restarting the group."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from parallel_support import group_children, group_config
from PIL import Image
from test_parallel_batching import at_once
from zimage_support import kit_handle, load_spec, render_in_process

from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.engine.group import GroupPipeline
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from inline_core.sampling import SampleJob

COMMON: dict[str, Any] = {"width": 64, "height": 64, "steps": 12, "guidance": 0.0}


@pytest.fixture(scope="module")
def handle(kit: KitPaths) -> GroupPipeline:
    return kit_handle(kit.root)


@pytest.fixture(scope="module")
def local(handle: GroupPipeline) -> ZImageStepPipeline:
    return load_spec(handle.remote_spec())


@pytest.fixture(scope="module")
def sampler() -> Iterator[ParallelSampler]:
    s = ParallelSampler(group_config(DEFAULT_RUNNER), retries=0)
    yield s
    s.close()
    assert group_children() == []


def use(kit: KitPaths, key: str, strength: float) -> LoraUse:
    path = kit.loras[key]
    return LoraUse(path.name, str(path), f"{path.name}:{path.stat().st_mtime_ns}", strength)


def test_split_renders_apply_each_requests_stack_and_share_forwards(
    kit: KitPaths, local: ZImageStepPipeline, handle: GroupPipeline, sampler: ParallelSampler
) -> None:
    sampler.start(handle.remote_spec())
    renders: list[dict[str, Any]] = [
        {"prompt": "a red fox", "seed": 1, "loras": (use(kit, "a", 1.0),)},
        {"prompt": "a cat", "seed": 2, "loras": (use(kit, "b", 0.7), use(kit, "a", 0.5))},
        {"prompt": "a boat", "seed": 3, "loras": ()},
    ]
    jobs = [SampleJob(handle, handle.request(**COMMON, **r)) for r in renders]
    outputs = at_once(sampler, jobs)
    loop = sampler.stats()["rankLoop"]
    assert loop["batchedForwards"] > 0  # different stacks, shared forwards
    for output, render in zip(outputs, renders, strict=True):
        assert isinstance(output, Image.Image), output
        expected = render_in_process(local, group_config(), None, **COMMON, **render)
        got = np.asarray(output, dtype=np.int16)
        assert int(np.abs(got - np.asarray(expected, dtype=np.int16)).max()) <= 1

    # A LoRA the ranks have not loaded yet, at a new strength: the same group renders it.
    launches = sampler.stats()["group"]["launches"]
    fresh = {"prompt": "a red fox", "seed": 1, "loras": (use(kit, "a-kohya", 1.0),)}
    [again] = at_once(sampler, [SampleJob(handle, handle.request(**COMMON, **fresh))])
    assert sampler.stats()["group"]["launches"] == launches
    # The kohya file holds A's weights: the same take as A at the same strength.
    assert isinstance(again, Image.Image) and isinstance(outputs[0], Image.Image)
    first = np.asarray(outputs[0], dtype=np.int16)
    assert int(np.abs(np.asarray(again, dtype=np.int16) - first).max()) <= 1
