"""What a rank does with the `sample` primitive's request, without launching a group: both rank
pipelines (the denoiser alone, and the node's stack a group may already hold) return the latents
the in-process `sample` returns, bit for bit, and the group picks the one it already holds."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.config import Config
from inline_core.device import ParallelSpec, Placement, policy_from_config
from inline_core.graph.primitives import FLOW_SAMPLERS, FLOW_SCHEDULES
from inline_core.models.catalog import Catalog
from inline_core.models.zimage.engine import ZImageEngine
from inline_core.models.zimage.kit import KitPaths, build_kit
from inline_core.models.zimage.remote import (
    DENOISER_LOADER,
    LOADER,
    GroupZImagePipeline,
    ZImageGroup,
    denoiser_spec,
    rank_spec,
    serves_denoiser,
)
from inline_core.models.zimage.residency import ResidentCache
from inline_core.models.zimage.resolve import Source, ZImageResolver
from inline_core.parallel.engines import NoSplit
from inline_core.parallel.protocol import Job, decode, encode
from inline_core.parallel.remote import PipelineSpec, RemotePipeline, decode_output
from inline_core.parallel.runner import WorkerContext, resolve
from inline_core.parallel.step_runner import StepPipeline, StepRunner
from inline_core.sampling import SampleJob, StepLoopSampler

CPU = Placement("cpu", "float32")
REQUEST: dict[str, Any] = {
    "prompt": "",
    "width": 64,
    "height": 48,
    "steps": 3,
    "guidance": 1.5,
    "seed": 5,
    "batch_size": 2,
    "batch_index": 1,
}


@pytest.fixture(scope="module")
def comfy(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    return build_kit(tmp_path_factory.mktemp("comfy") / "models", "tiny", layouts=("comfy",))


class _Control:
    def __init__(self) -> None:
        self.seen: list[object] = []

    def phase(self, phase: str) -> None:
        self.seen.append(phase)

    def step(self, step: int, count: int) -> None:
        self.seen.append((step, count))


def _in_rank(spec: PipelineSpec, sent: GroupZImagePipeline, state: Any) -> tuple[Any, list[object]]:
    """Rebuild the pipeline as a rank does, send it the request over the wire, run it."""
    pipeline: object = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, StepPipeline) and isinstance(pipeline, RemotePipeline)
    context = WorkerContext(0, 1, 0, "cpu", ParallelSpec(), "auto")
    runner = StepRunner(pipeline, pipeline, context, NoSplit(), None, spec.loader)
    request = sent.remote_request(state)
    job = decode(encode(Job(1, request.params, request.blobs)))
    assert isinstance(job, Job)
    control = _Control()
    out = runner.run(job.params, job.blobs, control)
    return decode_output(out.meta["output"], out.arrays), control.seen


# Every sampler and every schedule the `sample` node offers, each at least once.
CHOICES = list(zip(FLOW_SAMPLERS, itertools.cycle(FLOW_SCHEDULES[::-1]), strict=False))


@pytest.mark.parametrize(("sampler_name", "schedule"), CHOICES)
def test_both_rank_pipelines_return_the_in_process_latents(
    comfy: KitPaths, sampler_name: str, schedule: str
) -> None:
    config = Config(models_dir=comfy.root, profile="cpu")
    sources = ZImageResolver(Catalog(comfy.root), config).resolve().require()
    transformer = Source(comfy.root / "diffusion_models" / "zimage_tiny.safetensors")
    assert sources.transformer == transformer and sources.scheduler is None
    engine = ZImageEngine(policy_from_config(config), ResidentCache())
    encoder = engine.prompt_encoder(sources.text_encoder, sources.tokenizer)
    encoded: Mapping[str, Conditioning] = {
        "positive": encoder.encode("a lighthouse"),
        "negative": encoder.encode("blurry"),
    }
    noise = torch.randn(1, 16, 6, 8, generator=torch.Generator().manual_seed(2))
    start = Latents(noise, (1, 16, 6, 8))
    request = {**REQUEST, **encoded, "start": start, "denoise": 0.6}
    request.update(sampler=sampler_name, sigma_schedule=schedule)
    local = engine.denoise_pipeline_for(transformer, None)
    sampler = StepLoopSampler()
    try:
        seen: list[object] = []
        job = SampleJob(
            pipeline=local,
            state=local.request(**request),
            on_phase=seen.append,
            on_step=lambda s, c: seen.append((s, c)),
        )
        expected = sampler.run(job)
    finally:
        sampler.close()
    assert isinstance(expected, Latents)

    full = rank_spec(sources, [CPU] * 3)
    alone = denoiser_spec(transformer, None, CPU)
    assert (full.loader, alone.loader) == (LOADER, DENOISER_LOADER)
    for spec in (full, alone):
        handle = GroupZImagePipeline(spec, 8, output="latents")
        state = handle.request(**request)
        got, events = _in_rank(spec, handle, state)
        assert isinstance(got, torch.Tensor) and got.dtype == expected.value.dtype
        assert torch.equal(got, expected.value)  # the same latents, exactly
        assert events == seen


def test_the_group_samples_with_the_stack_it_already_holds(comfy: KitPaths, tmp_path: Path) -> None:
    config = Config(models_dir=comfy.root, profile="cpu")
    sources = ZImageResolver(Catalog(comfy.root), config).resolve().require()
    full = rank_spec(sources, [CPU] * 3)
    other = Source(tmp_path / "other.safetensors")
    assert serves_denoiser(full, sources.transformer, None, "float32")
    assert not serves_denoiser(full, sources.transformer, None, "bfloat16")
    assert not serves_denoiser(full, other, None, "float32")
    alone = denoiser_spec(sources.transformer, None, CPU)
    assert serves_denoiser(alone, sources.transformer, None, "float32")
    group = ZImageGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)  # launches nothing
    try:
        assert group.sampler.spec is None
        handle = group.denoiser_for(sources.transformer, None, CPU)
        assert (handle.spec, handle.output, handle.spatial_factor) == (alone, "latents", 8)
        group.sampler._group_for(full)  # pyright: ignore[reportPrivateUsage]  # as the node would
        assert group.denoiser_for(sources.transformer, None, CPU).spec == full  # no restart
        assert group.denoiser_for(other, None, CPU).spec == denoiser_spec(other, None, CPU)
    finally:
        group.close()
