"""What a rank does with the `sample` primitive's request, without launching a group: both rank
pipelines (the denoiser alone, and the node's stack a group may already hold) return the latents
the in-process `sample` returns, bit for bit, and the group picks the one it already holds."""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.config import Config
from inline_core.contract.sources import Sources
from inline_core.device import ParallelSpec, policy_from_config
from inline_core.engine.group import GroupPipeline, ModelGroup, rank_spec
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import KitPaths, build_kit
from inline_core.graph.primitives import FLOW_SAMPLERS, FLOW_SCHEDULES
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source
from inline_core.parallel.collective import Command
from inline_core.parallel.engines import NoSplit
from inline_core.parallel.protocol import (
    Failure,
    Job,
    Message,
    Phase,
    Progress,
    Result,
    Shutdown,
    decode,
    encode,
)
from inline_core.parallel.remote import PipelineSpec, decode_output
from inline_core.parallel.runner import WorkerContext, resolve
from inline_core.parallel.step_runner import RankPipeline, StepLoopRunner
from inline_core.sampling import SampleJob, StepLoopSampler

CPU = {"text_encoder": "float32", "denoiser": "float32", "vae": "float32"}
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


def _in_rank(spec: PipelineSpec, sent: GroupPipeline, state: Any) -> tuple[Any, list[object]]:
    """Rebuild the pipeline as a rank does, send it the request over the wire, and run it
    through the rank's own step loop (one rank: what it shares goes nowhere)."""
    pipeline: object = resolve(spec.loader)(device="cpu", **spec.args)
    assert isinstance(pipeline, RankPipeline)
    context = WorkerContext(0, 1, 0, "cpu", ParallelSpec(), "auto")
    runner = StepLoopRunner(pipeline, context, NoSplit(), None, spec.loader)
    request = sent.remote_request(state)
    job = decode(encode(Job(1, request.params, request.blobs)))  # what rank 0 receives
    assert isinstance(job, Job)
    inbox: queue.Queue[Message] = queue.Queue()
    sent_back: queue.Queue[Message] = queue.Queue()

    def alone(command: Command) -> Command:
        return command

    serving = threading.Thread(target=runner.serve_leader, args=(inbox, sent_back.put, alone, 60.0))
    serving.start()
    inbox.put(job)
    seen: list[object] = []
    while not isinstance(message := sent_back.get(timeout=120), Result | Failure):
        if isinstance(message, Phase):
            seen.append(message.phase)
        elif isinstance(message, Progress):
            seen.append((message.step, message.count))
    inbox.put(Shutdown())
    serving.join(timeout=60)
    assert isinstance(message, Result), message
    return decode_output(message.meta["output"], message.arrays), seen


# Each kind of sampler (one call a step, two, multistep, stochastic, diffusers' UniPC) on a
# schedule of its own: the rank runs the library as the server does, noise included.
CHOICES = [
    ("euler", "simple"),
    ("heun", "karras"),
    ("lms", "normal"),
    ("dpmpp_2m_sde", "beta"),
    ("dpmpp_sde", "kl_optimal"),
    ("uni_pc_bh2", "exponential"),
]
assert {s for s, _ in CHOICES} <= set(FLOW_SAMPLERS)
assert {s for _, s in CHOICES} <= set(FLOW_SCHEDULES)


@pytest.mark.parametrize(("sampler_name", "schedule"), CHOICES)
def test_both_rank_pipelines_return_the_in_process_latents(
    comfy: KitPaths, sampler_name: str, schedule: str
) -> None:
    config = Config(models_dir=comfy.root, profile="cpu", dtype="float32")
    family = ZImageFamily(Catalog(comfy.root), {})
    sources = family.files.resolve().require()
    transformer = Source(comfy.root / "diffusion_models" / "zimage_tiny.safetensors")
    assert sources.get("transformer") == transformer and sources.get("scheduler") is None
    sampler = StepLoopSampler()
    runtime = ModelRuntime(config, sampler, policy_from_config(config))
    stacks = runtime.stacks()
    encoder = stacks.text_encoder(
        family, sources.require("text_encoder"), sources.require("tokenizer")
    )
    encoded: Mapping[str, Conditioning] = {
        "positive": encoder.encode("a lighthouse"),
        "negative": encoder.encode("blurry"),
    }
    noise = torch.randn(1, 16, 6, 8, generator=torch.Generator().manual_seed(2))
    start = Latents(noise, (1, 16, 6, 8))
    request = {**REQUEST, **encoded, "start": start, "denoise": 0.6}
    request.update(sampler=sampler_name, sigma_schedule=schedule)
    local: Any = stacks.denoiser(family, transformer, None)
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

    alone_sources = Sources.of(family.name, "", {"transformer": transformer, "scheduler": None})
    full = rank_spec(family, "node", sources, CPU)
    alone = rank_spec(family, "denoiser", alone_sources, {"denoiser": "float32"})
    for stack, spec, held in (("node", full, sources), ("denoiser", alone, alone_sources)):
        handle = GroupPipeline(family, spec, "denoiser", held, output="latents")
        state = handle.request(**request)
        got, events = _in_rank(spec, handle, state)
        assert isinstance(got, torch.Tensor) and got.dtype == expected.value.dtype, stack
        assert torch.equal(got, expected.value)  # the same latents, exactly
        assert events == seen


def test_the_group_samples_with_the_stack_it_already_holds(comfy: KitPaths, tmp_path: Path) -> None:
    family = ZImageFamily(Catalog(comfy.root), {})
    sources = family.files.resolve().require()
    transformer = sources.require("transformer")
    full = rank_spec(family, "node", sources, CPU)
    other = Source(tmp_path / "other.safetensors")
    group = ModelGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)  # launches nothing
    try:
        assert group.sampler.spec is None
        handle = group.denoiser_for(family, transformer, None, "float32")
        assert (handle.output, handle.spec.args["stack"]) == ("latents", "denoiser")
        group.sampler._group_for(full)  # pyright: ignore[reportPrivateUsage]  # as the node would
        assert group.denoiser_for(family, transformer, None, "float32").spec == full  # no restart
        assert group.denoiser_for(family, transformer, None, "bfloat16").spec != full
        assert group.denoiser_for(family, other, None, "float32").spec.args["stack"] == "denoiser"
    finally:
        group.close()
