"""What of a Z-Image request crosses into the ranks, and how the ranks are told what to load."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch
from PIL import Image

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.config import Config
from inline_core.device import ParallelSpec, Placement
from inline_core.models.catalog import Catalog
from inline_core.models.zimage.kit import KitPaths
from inline_core.models.zimage.remote import (
    DENOISER_LOADER,
    LOADER,
    GroupZImagePipeline,
    ZImageGroup,
    rank_spec,
    sources_from_json,
)
from inline_core.models.zimage.resolve import ZImageResolver
from inline_core.models.zimage.wire import request_output
from inline_core.parallel.protocol import Job, decode, encode
from inline_core.parallel.remote import PipelineSpec, RemoteRequest


def test_a_request_arrives_in_the_ranks_as_it_left(kit: KitPaths) -> None:
    config = Config(models_dir=kit.root, profile="cpu")
    sources = ZImageResolver(Catalog(kit.root), config).resolve().require()
    group = ZImageGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)  # launches nothing
    placements = [Placement("cpu", "float32"), Placement("cpu", "bfloat16")] * 2
    handle = group.pipeline_for(sources, placements[:3])
    spec = handle.remote_spec()
    assert spec.loader == LOADER
    assert spec.args["dtypes"] == {
        "text_encoder": "float32",
        "denoiser": "bfloat16",
        "vae": "float32",
    }
    files = spec.args["sources"]
    assert isinstance(files, dict) and sources_from_json(files) == sources
    assert spec == rank_spec(sources, placements[:3])  # same files, same dtypes: same group
    assert handle.spatial_factor == 8  # read from the VAE's config, no weights loaded

    source = Image.fromarray(np.random.default_rng(5).integers(0, 255, (48, 32, 3), np.uint8))
    state = handle.request(
        prompt="a fox",
        negative_prompt="blurry",
        width=64,
        height=96,
        steps=6,
        guidance=2.5,
        seed=2**40 + 3,
        image=source,
        strength=0.7,
        cfg_normalization=0.5,
    )
    sent = handle.remote_request(state)
    job = decode(encode(Job(1, sent.params, sent.blobs)))  # what rank 0 receives
    assert isinstance(job, Job)
    again = handle.state_from_remote(RemoteRequest(job.params, job.blobs))
    inputs = [f.name for f in fields(state) if f.name not in ("image", "model_key")]
    assert {n: getattr(again, n) for n in inputs} == {n: getattr(state, n) for n in inputs}
    assert again.image is not None and again.image.tobytes() == source.tobytes()
    group.close()


def test_encoded_prompts_and_start_latents_cross_bit_for_bit() -> None:
    """The `sample` primitive's request: its tensors (any dtype, bfloat16 included) arrive
    exactly, and the handle asks for latents back."""
    handle = GroupZImagePipeline(PipelineSpec(DENOISER_LOADER, {}), 8, output="latents")
    gen = torch.Generator().manual_seed(4)
    positive = Conditioning(torch.randn(7, 32, generator=gen).to(torch.bfloat16), 7)
    negative = Conditioning(torch.randn(3, 32, generator=gen), 3)
    start = Latents(torch.randn(1, 16, 8, 8, generator=gen), (1, 16, 8, 8))
    state = handle.request(
        prompt="",
        width=64,
        height=64,
        steps=2,
        guidance=1.5,
        seed=1,
        sampler="dpmpp_2m",
        sigma_schedule="karras",
        denoise=0.5,
        start=start,
        positive=positive,
        negative=negative,
    )
    sent = handle.remote_request(state)
    assert sent.params["output"] == "latents"
    job = decode(encode(Job(1, sent.params, sent.blobs)))
    assert isinstance(job, Job)
    received = RemoteRequest(job.params, job.blobs)
    assert request_output(received) == "latents"
    again = handle.state_from_remote(received)
    for before, after in ((positive, again.positive), (negative, again.negative)):
        assert after is not None and after.tokens == before.tokens
        assert after.value.dtype == before.value.dtype
        assert torch.equal(after.value, before.value)
    assert again.start is not None and again.start.shape == start.shape
    assert torch.equal(again.start.value, start.value)
    assert (again.sampler, again.sigma_schedule, again.denoise) == ("dpmpp_2m", "karras", 0.5)
