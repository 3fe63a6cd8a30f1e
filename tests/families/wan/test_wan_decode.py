"""The Wan VAE decodes in temporal chunks (spec 003's `SupportsChunkedVAEDecode`): the chunks
together are exactly the whole decode, and a render streams one event per chunk before its take."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from wan_harness import render, take_frames, wan_rig

from inline_core.components.interfaces import Latents
from inline_core.components.step import supports_chunked_vae_decode
from inline_core.diffusion.vae.pixels import to_pixels
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.progress import ChunkDecoded, NodeDone, RunEvent
from inline_core.sampling.loop import StepLoopSampler


@pytest.mark.parametrize(
    ("model", "channels", "factor"),
    [("wan2.1_t2v_tiny_fp32.safetensors", 16, 8), ("wan2.2_ti2v_tiny_fp32.safetensors", 48, 16)],
    ids=["wan21-vae", "wan22-vae"],
)
def test_chunked_decode_equals_whole_decode(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, model: str, channels: int, factor: int
) -> None:
    """Wan 2.2's VAE unpatchifies each chunk (2x2 pixels per cell, frame by frame): the same."""
    from diffusers import AutoencoderKLWan  # pyright: ignore[reportPrivateImportUsage]

    pipeline = wan_rig(wan_kit.root, wan_sampler).pipeline(model)
    vae = pipeline.vae
    assert supports_chunked_vae_decode(pipeline.vae)
    assert vae.chunk_value_range == (-1.0, 1.0)
    assert vae.spatial_factor == factor
    size = (32 // factor, 48 // factor)
    latents = torch.randn(1, channels, 4, *size, generator=torch.Generator().manual_seed(3))
    chunks = list(vae.decode_chunks(Latents(latents, tuple(latents.shape))))
    assert [c.shape[2] for c in chunks] == [1, 4, 4, 4]  # the first frame alone, then four each
    joined = torch.cat(chunks, dim=2)
    # diffusers' own whole decode of the same latents (denormalised as WanPipeline does)
    assert isinstance(vae.autoencoder, AutoencoderKLWan)
    config = vae.autoencoder.config
    mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1)  # pyright: ignore
    std = 1.0 / torch.tensor(config.latents_std).view(1, -1, 1, 1, 1)  # pyright: ignore
    with torch.inference_mode():
        whole = vae.autoencoder.decode(latents / std + mean, return_dict=False)[0]  # pyright: ignore
    assert torch.equal(joined, whole)
    assert float(joined.min()) >= -1.0 and float(joined.max()) <= 1.0
    assert float(joined.std()) > 0.0
    assert np.array_equal(to_pixels(joined, vae.chunk_value_range).shape, (13, 32, 48, 3))


def test_a_render_streams_each_chunk_before_its_take(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    events: list[RunEvent] = []
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, on_event=events.append, frames=13, guidance=1.0)
    chunks = [e for e in events if isinstance(e, ChunkDecoded)]
    assert [(c.first, c.count, c.total, c.fps) for c in chunks] == [
        (0, 1, 13, 16),
        (1, 4, 13, 16),
        (5, 4, 13, 16),
        (9, 4, 13, 16),
    ]
    assert not any(isinstance(e, NodeDone) for e in events)  # the executor sends that
    assert take_frames(result).shape[0] == 13
