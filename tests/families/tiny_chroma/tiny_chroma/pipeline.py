"""Chroma as a step pipeline (spec 003): the arithmetic of diffusers' `ChromaPipeline`, per request.

Latents are packed 2x2 into the transformer's tokens; each request keeps its own scheduler; one
`denoise_step` runs a batch of requests of one latent shape (positives, then the negatives of
those with guidance) through one forward, with each row's own text mask.

Chroma's mask is a bias, not a cut: the pipeline hands the transformer a float mask (1 over the
real tokens, the first padding one and the image, 0 elsewhere), and each block adds its outer
product to the attention scores. Split by cache-dit's Ulysses, each rank concatenates its shard
of the text with its shard of the image, and the all-to-all gathers those rank by rank, while the
mask (not sharded) stays in the unsplit order: 5 to 17 levels off for short prompts, 1 for one that
fills the 512 tokens. So under that split the mask is laid out in the gathered order (each rank's
text shard, then its image shard): the exception this engine forces. Ring keeps the sequence
sharded, where one mask cannot serve every rank, so Chroma splits with Ulysses only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.weights import LoraWeights
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.errors import InvalidRequest
from inline_core.families.flow_pipeline import FlowImagePipeline
from tiny_chroma.encoder import MaskedT5Encoder, transformer_mask
from tiny_chroma.request import LATENT_FACTOR, PATCH, ChromaRequest, new_request

CHANNELS = 16


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(1, C, h, w) -> (1, h/2 * w/2, 4C), as the pipeline packs them."""
    b, c, h, w = latents.shape
    x = latents.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // 2) * (w // 2), c * 4)


def unpack(packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
    b, _tokens, c = packed.shape
    x = packed.view(b, h // 2, w // 2, c // 4, 2, 2).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c // 4, h, w)


def image_ids(h: int, w: int) -> torch.Tensor:
    ids = torch.zeros(h // 2, w // 2, 3)
    ids[..., 1] = ids[..., 1] + torch.arange(h // 2)[:, None]
    ids[..., 2] = ids[..., 2] + torch.arange(w // 2)[None, :]
    return ids.reshape(-1, 3)


def no_loras(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
    """The test family reads no LoRA file: a request naming one is refused, never rendered
    without it."""
    raise InvalidRequest(f"loras/{name}: the tiny Chroma test family takes no LoRAs")


class ChromaDenoisePipeline(FlowImagePipeline[ChromaRequest]):
    """The layer's flow image pipeline (`families/flow_pipeline.py`) with Chroma's forward (each
    row's own text mask), its true CFG, its packing, and the `sample` primitive's denoise and
    start latents at `prepare_encode`."""

    preview_name = "flux"  # FLUX.1's 16 latent channels, which Chroma keeps

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_lora=no_loras, **kwargs)
        self.ulysses = 1  # the ranks a Ulysses split gathers the sequence from

    def split_by(self, engine: str, degrees: Mapping[str, int], /) -> None:
        """`components.step.SupportsSplitNotice`: lay masks out as the engine gathers tokens."""
        if degrees.get("ring", 1) > 1:
            raise ValueError("Chroma's mask is laid out for Ulysses; it cannot split with ring")
        self.ulysses = degrees.get("ulysses", 1)

    def request(self, **kwargs: Any) -> ChromaRequest:
        return new_request(self.model_key, **kwargs)

    def _encode_prompts(self, state: ChromaRequest) -> None:
        if state.positive is None or (state.cfg and state.negative is None):
            raise InvalidRequest("a request for the denoiser alone needs its prompts encoded")

    def prepare_encode(self, state: ChromaRequest, /) -> ChromaRequest:
        with torch.inference_mode():
            h, w = state.latent_pixels
            generator = torch.Generator("cpu").manual_seed(state.seed)
            drawn = torch.randn(
                (state.batch_size, CHANNELS, h, w), generator=generator, dtype=torch.float32
            )
            noise = pack(drawn[state.batch_index : state.batch_index + 1]).to(self.device)
            self._encode_prompts(state)
            schedule = FlowMatchSchedule.create(
                self.scheduler_config,
                state.steps,
                noise.shape[1],
                self.device,
                sampler=state.sampler,
                schedule=state.sigma_schedule,
                denoise=state.denoise,
                spacing=numpy_flow_spacing,
                shift=state.model_shift,
            )
            if state.start is not None:
                start = pack(cast(torch.Tensor, state.start.value).to(self.device, torch.float32))
                noise = schedule.noised(start, noise)
            state.schedule = schedule
            state.latents = Latents(noise, tuple(noise.shape))
        return state

    def _forward(self, rows: list[tuple[ChromaRequest, Conditioning]]) -> torch.Tensor:
        h, w = rows[0][0].latent_pixels
        hidden = torch.cat([cast(Latents, s.latents).value for s, _c in rows])
        t = torch.cat(
            [cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index) for s, _c in rows]
        )
        text = torch.stack([cast(torch.Tensor, c.value) for _s, c in rows]).to(self.dtype)
        length = text.shape[1]
        masks = torch.stack([transformer_mask(c.tokens, length, self.dtype) for _s, c in rows])
        image = torch.ones(len(rows), hidden.shape[1], dtype=torch.bool)
        mask = gathered(masks, image, self.ulysses)
        with self.swap.use(self.transformer, self.placement):
            return cast(
                torch.Tensor,
                self.transformer(
                    hidden_states=hidden.to(self.dtype),
                    timestep=t.to(self.dtype),
                    encoder_hidden_states=text,
                    txt_ids=torch.zeros(length, 3),
                    img_ids=image_ids(h, w),
                    attention_mask=mask.to(self.device),
                    return_dict=False,
                )[0],
            )

    def _guide(self, pred: torch.Tensor, negative: torch.Tensor, guidance: float) -> torch.Tensor:
        return negative + guidance * (pred - negative)

    def _pack(self, latents: torch.Tensor) -> torch.Tensor:
        return pack(latents)

    def _unpack(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return unpack(packed, h * PATCH, w * PATCH)  # a token grid: latents twice its size

    def _preview(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return self._unpack(packed, h, w)

    def _release(self, state: ChromaRequest) -> None:
        super()._release(state)
        state.start = None


class ChromaStepPipeline(ChromaDenoisePipeline):
    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]

    def __init__(
        self, *, text_encoder: MaskedT5Encoder, vae: AutoencoderKLVAE, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.text_encoder = text_encoder
        self.vae = vae

    def _encode_prompts(self, state: ChromaRequest) -> None:
        if state.positive is None:
            state.positive = self.text_encoder.encode(state.prompt)
        if state.cfg and state.negative is None:
            state.negative = self.text_encoder.encode(state.negative_prompt)

    def _decoder(self) -> AutoencoderKLVAE:
        return self.vae


def gathered(text: torch.Tensor, image: torch.Tensor, ranks: int) -> torch.Tensor:
    """The mask (rows, text + image) in the order a Ulysses split of `ranks` gathers the tokens:
    each rank's shard of the text, then its shard of the image (one rank: text, then image)."""
    texts, images = text.chunk(ranks, dim=1), image.chunk(ranks, dim=1)
    return torch.cat([part for pair in zip(texts, images, strict=True) for part in pair], dim=1)


__all__ = ["LATENT_FACTOR", "PATCH", "ChromaDenoisePipeline", "ChromaStepPipeline"]
