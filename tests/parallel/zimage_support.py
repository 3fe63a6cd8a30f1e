"""Z-Image in the worker-group tests: the pipeline the ranks load, rendered in process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from inline_core.contract.sources import Sources
from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.engine.group import GroupPipeline, rank_spec
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.pipeline import ZImageStepPipeline
from inline_core.models.catalog import Catalog
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.remote import PipelineSpec
from inline_core.parallel.runner import resolve
from inline_core.sampling import SampleJob, StepLoopSampler

CPU_DTYPES = {"text_encoder": "float32", "denoiser": "float32", "vae": "float32"}


def kit_family(models_dir: Path) -> ZImageFamily:
    return ZImageFamily(Catalog(models_dir), {})


def kit_sources(models_dir: Path) -> Sources:
    return kit_family(models_dir).files.resolve().require()


def kit_handle(models_dir: Path) -> GroupPipeline:
    """The server's handle on the kit's stack in the ranks, on CPU (what a split render sends)."""
    family = kit_family(models_dir)
    sources = family.files.resolve().require()
    return GroupPipeline(family, rank_spec(family, "node", sources, CPU_DTYPES), "node", sources)


def kit_lora(kit: KitPaths, key: str, strength: float) -> LoraUse:
    """One of the kit's LoRAs (`kit_loras.py`) at `strength`, as a node's stack names it."""
    path = kit.loras[key]
    return LoraUse(path.name, str(path), f"{path.name}:{path.stat().st_mtime_ns}", strength)


def load_spec(spec: PipelineSpec) -> ZImageStepPipeline:
    """The pipeline in this process, built by the loader the spec names, as each rank does."""
    pipeline = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, ZImageStepPipeline)
    return pipeline


def rank_threads(config: GroupConfig) -> int:
    """Torch threads of each CPU rank (OMP_NUM_THREADS passes through when set)."""
    return int(os.environ.get("OMP_NUM_THREADS") or config.rank_threads())


def render_in_process(
    pipe: ZImageStepPipeline, config: GroupConfig, events: list[object] | None = None, **kw: Any
) -> Image.Image:
    """The in-process take at the ranks' thread count: oneDNN's float reductions depend on the
    thread count (2 threads vs 1 moves an occasional pixel by 1 with or without a split)."""
    seen: list[object] = [] if events is None else events
    loop = StepLoopSampler()
    threads = torch.get_num_threads()
    torch.set_num_threads(rank_threads(config))
    try:
        job = SampleJob(
            pipeline=pipe,
            state=pipe.request(**kw),
            on_phase=seen.append,
            on_step=lambda s, c: seen.append((s, c)),
        )
        return loop.run(job)
    finally:
        torch.set_num_threads(threads)
        loop.close()
