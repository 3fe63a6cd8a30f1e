"""LTX-2's video VAE decodes in temporal chunks (spec 003's `SupportsChunkedVAEDecode`): each
chunk from a window holding the decoder's reach on either side, so the chunks together are the
one-shot decode to the float arithmetic of a smaller tensor (1e-5: the window's convolutions
are blocked differently, nothing is approximated; one latent frame less of context is not:
shown below); and a render hands each chunk on before its take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ltx2_harness import ltx2_rig, render, take_frames

from inline_core.components.step import supports_chunked_vae_decode
from inline_core.families.ltx2.decode import (
    Chunk,
    Reach,
    decode_chunks,
    frame_span,
    plan,
    receptive_reach,
)
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.runtime.progress import ChunkDecoded, RunEvent
from inline_core.sampling.loop import StepLoopSampler

ARITHMETIC = 1e-5  # floats in (-1, 1): the same arithmetic, blocked otherwise


@pytest.fixture(scope="module")
def vae(ltx2_kit: LTX2Kit) -> Any:
    from diffusers import AutoencoderKLLTX2Video  # pyright: ignore[reportPrivateImportUsage]

    folder = str(ltx2_kit.diffusers_dir / "vae")
    return AutoencoderKLLTX2Video.from_pretrained(folder).eval()  # pyright: ignore


def one_shot(vae: Any, latents: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return vae.decode(latents, None, return_dict=False)[0]


def test_the_plan_grows_its_chunks_to_the_reach_and_covers_every_frame_once() -> None:
    reach = Reach(6, 6)
    chunks = plan(30, reach)
    assert [(c.start, c.end) for c in chunks] == [
        (0, 2),
        (2, 6),
        (6, 12),
        (12, 18),
        (18, 24),
        (24, 30),
    ]
    assert all(c.window_start == max(0, c.start - 6) for c in chunks)
    assert all(c.window_end == min(30, c.end + 6) for c in chunks)
    spans = [frame_span(c, 8) for c in chunks]
    assert spans[0] == (0, 9) and spans[-1][1] == 8 * 29 + 1
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    # A causal decoder reads nothing after a frame, and a window always starts a latent frame
    # early (the upsamplers drop the first frames of what they are given).
    assert plan(4, Reach(0, 0), first=1)[1] == Chunk(1, 2, 0, 2)
    # A chunk whose window would be the whole video takes the rest: LTX-2's 121 frames (16
    # latent frames) within its decoder's reach of 22 decode once, as one chunk.
    assert plan(16, Reach(22, 22)) == [Chunk(0, 16, 0, 16)]
    assert plan(9, reach) == [Chunk(0, 2, 0, 8), Chunk(2, 9, 0, 9)]


def test_the_kit_decoder_s_reach_is_read_from_its_layers(vae: Any) -> None:
    # conv_in 2, the mid block's resnet 4, the upsampler 2, then at twice the frames: the up
    # block's resnet 4/2 and conv_out 2/2: 11 frames of kernel, half on each side.
    assert receptive_reach(vae) == Reach(6, 6)


def test_chunks_together_are_the_one_shot_decode(vae: Any) -> None:
    latents = torch.randn(1, 128, 20, 8, 8, generator=torch.Generator().manual_seed(3))
    whole = one_shot(vae, latents)
    with torch.inference_mode():
        chunks = list(decode_chunks(vae, latents))
    assert [c.shape[2] for c in chunks] == [3, 8, 12, 12, 4]  # 39 frames: 1 + 2 x 19
    joined = torch.cat(chunks, dim=2)
    assert joined.shape == whole.shape
    assert float((joined - whole).abs().max()) <= ARITHMETIC
    assert float(whole.std()) > 0.0


def test_less_context_than_the_reach_would_change_the_frames(vae: Any) -> None:
    """Why the windows hold the whole reach: one latent frame less and the frames near a
    chunk's edge see the edge repeated where the one-shot decode sees the next frames."""
    latents = torch.randn(1, 128, 12, 8, 8, generator=torch.Generator().manual_seed(4))
    whole = one_shot(vae, latents)
    short = Reach(5, 5)
    pieces: list[torch.Tensor] = []
    with torch.inference_mode():
        for piece in plan(12, short):
            window = latents[:, :, piece.window_start : piece.window_end]
            decoded = vae.decode(window, None, return_dict=False)[0]
            first, end = frame_span(piece, 2)
            pieces.append(
                decoded[:, :, first - 2 * piece.window_start : end - 2 * piece.window_start]
            )
    assert float((torch.cat(pieces, dim=2) - whole).abs().max()) > 1e-3


def test_a_render_streams_each_chunk_before_its_take(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    events: list[RunEvent] = []
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    assert supports_chunked_vae_decode(rig.pipeline().video_decode)
    result = render(rig, tmp_path, on_event=events.append, frames=17, fps=24)
    chunks = [e for e in events if isinstance(e, ChunkDecoded)]
    # 9 latent frames: a first chunk of 2, then the 7 left (the next window would hold them all).
    assert [(c.first, c.count, c.total, c.fps) for c in chunks] == [(0, 3, 17, 24), (3, 14, 17, 24)]
    assert take_frames(result).shape[0] == 17
