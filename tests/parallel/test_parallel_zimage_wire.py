"""What of a Z-Image request crosses into the ranks, and how the ranks are told what to load."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from zimage_support import CPU_DTYPES, kit_family, kit_sources, load_spec

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.contract.sources import Sources
from inline_core.device import ParallelSpec
from inline_core.engine.group import LOADER, GroupPipeline, ModelGroup, rank_spec
from inline_core.errors import InvalidRequest
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.request import ZImageRequest
from inline_core.parallel.protocol import Job, decode, encode
from inline_core.parallel.remote import RemoteRequest
from inline_core.parallel.wire import decode_fields

DTYPES = {"text_encoder": "float32", "denoiser": "bfloat16", "vae": "float32"}


def received(handle: GroupPipeline, state: Any) -> tuple[RemoteRequest, dict[str, Any]]:
    """What rank 0 receives for `state`, and the fields it rebuilds the state from."""
    sent = handle.remote_request(state)
    job = decode(encode(Job(1, sent.params, sent.blobs)))
    assert isinstance(job, Job)
    request = RemoteRequest(job.params, job.blobs)
    return request, decode_fields(request)


def test_a_request_arrives_in_the_ranks_as_it_left(kit: KitPaths) -> None:
    family = kit_family(kit.root)
    sources = kit_sources(kit.root)
    group = ModelGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)  # launches nothing
    handle = group.pipeline_for(family, sources, DTYPES)
    spec = handle.remote_spec()
    assert spec.loader == LOADER and spec.args["family"] == "z-image"
    assert spec.args["stack"] == "node" and spec.args["dtypes"] == DTYPES
    files = spec.args["sources"]
    assert isinstance(files, dict) and Sources.from_json(files) == sources
    assert spec == rank_spec(family, "node", sources, DTYPES)  # same files and dtypes: one group

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
    assert isinstance(state, ZImageRequest)
    request, sent_fields = received(handle, state)
    assert request.params["output"] == "output"
    again = load_spec(rank_spec(family, "node", sources, CPU_DTYPES)).request(**sent_fields)
    inputs = [f.name for f in fields(state) if f.name not in ("image", "model_key")]
    assert {n: getattr(again, n) for n in inputs} == {n: getattr(state, n) for n in inputs}
    assert again.image is not None and again.image.tobytes() == source.tobytes()
    # What the rank makes for itself does not cross: its own model key, schedule and latents.
    assert not {"model_key", "step_index", "schedule", "latents"} & set(sent_fields)
    group.close()


def test_sizes_are_checked_before_the_ranks_hear_of_a_request(kit: KitPaths) -> None:
    group = ModelGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)
    handle = group.pipeline_for(kit_family(kit.root), kit_sources(kit.root), DTYPES)
    try:
        # The VAE's factor is read from its config: no weights are loaded in this process.
        with pytest.raises(InvalidRequest, match="multiples of 16"):
            handle.request(prompt="x", width=72, height=64, steps=2, guidance=0.0, seed=1)
    finally:
        group.close()


def test_encoded_prompts_and_start_latents_cross_bit_for_bit(kit: KitPaths) -> None:
    """The `sample` primitive's request: its tensors (any dtype, bfloat16 included) arrive
    exactly, and the handle asks for latents back."""
    family = kit_family(kit.root)
    group = ModelGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)
    handle = group.denoiser_for(
        family, kit_sources(kit.root).require("transformer"), None, "float32"
    )
    assert handle.output == "latents" and handle.remote_spec().args["stack"] == "denoiser"
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
    request, again = received(handle, state)
    assert request.params["output"] == "latents"
    for before, after in ((positive, again["positive"]), (negative, again["negative"])):
        assert isinstance(after, Conditioning) and after.tokens == before.tokens
        assert after.value.dtype == before.value.dtype
        assert torch.equal(after.value, before.value)
    assert isinstance(again["start"], Latents) and again["start"].shape == start.shape
    assert torch.equal(again["start"].value, start.value)
    assert (again["sampler"], again["sigma_schedule"], again["denoise"]) == (
        "dpmpp_2m",
        "karras",
        0.5,
    )
    group.close()
