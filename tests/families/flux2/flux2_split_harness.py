"""FLUX.2's renders for the split tests under Ring and Ring over Ulysses (two or four gloo ranks,
on the shared ring groups), over the shared split-take harness
(`tests/families/split_take_harness.py`: the in-process take a split's take is held to, FLUX.2's
tolerance, a rank's refusal). Every block's attention (double- and single-stream) shards evenly:
each rank sees its share of the prompt's 512 tokens and of the image's (its references' after
them)."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import numpy as np
from PIL import Image

from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.flux2 import Flux2Family
from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.families.flux2.pipeline import Flux2StepPipeline
from inline_core.models.catalog import Catalog
from inline_core.parallel.runner import resolve
from inline_core.parallel.sampler import ParallelSampler
from tests.families import split_take_harness as harness
from tests.parallel.zimage_support import CPU_DTYPES, rank_threads

MODEL = "flux2_klein_base_tiny.safetensors"  # guided: its guidance above 1 runs the empty prompt
DEV_MODEL = "flux2_dev_tiny.safetensors"  # ComfyUI's layout: guidance embedded, one row
# 64x48: 12 image tokens, which 2 and 4 ranks share
KW: dict[str, Any] = {"width": 64, "height": 48, "steps": 2}
GUIDED: dict[str, Any] = {"prompt": "a red fox", "seed": 7, "guidance": 3.0}
UNGUIDED: dict[str, Any] = {"prompt": "a kite", "seed": 3, "guidance": 1.0}
# 64x80: 20 more image tokens, 32 in all
REFERENCE = Image.fromarray(np.random.default_rng(5).integers(0, 255, (80, 64, 3), dtype=np.uint8))
WITH_REFERENCE: dict[str, Any] = {**GUIDED, "image": REFERENCE}


def split_handle(kit: Flux2Kit | Flux2DevKit, model: str = MODEL) -> GroupPipeline:
    family = Flux2Family(Catalog(kit.root), {})
    sources = family.resolve(NODE_TYPE, {"model": model}).require()
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


@contextmanager
def in_process_at_rank_threads(
    handle: GroupPipeline, group: ParallelSampler
) -> Generator[Flux2StepPipeline]:
    import torch

    spec = handle.remote_spec()
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, Flux2StepPipeline)
    threads = torch.get_num_threads()
    torch.set_num_threads(rank_threads(group.config))
    try:
        yield pipeline
    finally:
        torch.set_num_threads(threads)


def assert_split_equals_alone(
    local: Flux2StepPipeline, handle: GroupPipeline, group: ParallelSampler, render: dict[str, Any]
) -> None:
    request = {**KW, **render}
    state = local.request(**request)
    # klein base guides above 1 (two rows); dev embeds its guidance (one row)
    assert state.cfg == (render["guidance"] > 1 and not state.embedded_guidance)
    harness.assert_split_equals_alone(local, handle, group, request)


def assert_ranks_refuse(
    handle: GroupPipeline, group: ParallelSampler, size: tuple[int, int], *words: str
) -> None:
    """An unguided render of `size` (width, height) whose image tokens the ranks cannot share
    is refused on each rank in `words`, and the group renders the next one."""
    harness.assert_ranks_refuse(handle, group, {**KW, **UNGUIDED}, size, *words)
