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

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.flow.samplers import numpy_flow_spacing
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.placement import OffloadSwap, PlacementLike, torch_dtype
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.errors import InvalidRequest
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


class ChromaDenoisePipeline:
    _dit_modules = ["transformer"]
    _encoder_modules: list[str] = []
    _vae_modules: list[str] = []
    _resident_modules: list[str] = []

    def __init__(
        self,
        *,
        transformer: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        scheduler_config: Mapping[str, Any],
        model_key: Hashable,
    ) -> None:
        self.transformer = transformer
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        self.dtype = torch_dtype(placement.dtype)
        self.scheduler_config = dict(scheduler_config)
        self.model_key = model_key
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
            h, w = state.latent_size
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
            )
            if state.start is not None:
                start = pack(cast(torch.Tensor, state.start.value).to(self.device, torch.float32))
                noise = schedule.noised(start, noise)
            state.schedule = schedule
            state.latents = Latents(noise, tuple(noise.shape))
        return state

    def denoise_step(self, states: Sequence[ChromaRequest], /) -> list[torch.Tensor]:
        with torch.inference_mode():
            rows: list[tuple[ChromaRequest, Conditioning]] = [
                (s, cast(Conditioning, s.positive)) for s in states
            ]
            rows += [(s, cast(Conditioning, s.negative)) for s in states if s.cfg]
            out = self._forward(rows)
            preds: list[torch.Tensor] = []
            negatives = iter(out[len(states) :])
            for i, s in enumerate(states):
                pos = out[i : i + 1]
                if s.cfg:
                    neg = next(negatives).unsqueeze(0)
                    pos = neg + s.guidance * (pos - neg)
                preds.append(pos)
            return preds

    def _forward(self, rows: list[tuple[ChromaRequest, Conditioning]]) -> torch.Tensor:
        h, w = rows[0][0].latent_size
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

    def step_scheduler(self, state: ChromaRequest, noise_pred: Any, /) -> None:
        schedule, lat = _prepared(state)
        with torch.inference_mode():
            state.latents = schedule.step(state.step_index, noise_pred, lat)
        state.step_index += 1

    def post_latents(self, state: ChromaRequest, /) -> Latents:
        _schedule, lat = _prepared(state)
        h, w = state.latent_size
        value = unpack(cast(torch.Tensor, lat.value), h, w)
        state.latents = state.positive = state.negative = state.start = None
        return Latents(value, tuple(value.shape))

    def post_decode(self, state: ChromaRequest, /) -> Any:
        return self.post_latents(state)


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

    def post_decode(self, state: ChromaRequest, /) -> Image.Image:
        latents = self.post_latents(state)
        with torch.inference_mode():
            return cast(Image.Image, self.vae.decode(latents))


def gathered(text: torch.Tensor, image: torch.Tensor, ranks: int) -> torch.Tensor:
    """The mask (rows, text + image) in the order a Ulysses split of `ranks` gathers the tokens:
    each rank's shard of the text, then its shard of the image (one rank: text, then image)."""
    texts, images = text.chunk(ranks, dim=1), image.chunk(ranks, dim=1)
    return torch.cat([part for pair in zip(texts, images, strict=True) for part in pair], dim=1)


def _prepared(state: ChromaRequest) -> tuple[FlowMatchSchedule, Latents]:
    if state.schedule is None or state.latents is None:
        raise RuntimeError("prepare_encode has not run for this request")
    return cast(FlowMatchSchedule, state.schedule), state.latents


__all__ = ["LATENT_FACTOR", "PATCH", "ChromaDenoisePipeline", "ChromaStepPipeline"]
