"""FLUX.2 as a step pipeline (spec 003): the arithmetic of diffusers' `Flux2KleinPipeline` (and
`Flux2Pipeline` for dev, whose guidance is an input of the transformer, one per row),
per request, so the pixels match.

`prepare_encode` encodes the prompt (and the empty prompt of a guided base model), draws the
noise, encodes the reference images with the VAE and builds the request's private schedule
(FLUX.2's empirical shift `mu` for its token count and steps); `denoise_step` runs one forward
for requests of one latent shape and one set of reference shapes: each row is its latents, then
its reference images' latents, with one set of positions (text, latents at time 0, reference
`i` at time 10 + 10i); `step_scheduler` steps one request; `post_decode` decodes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.chat_prompt import ChatPromptEncoder
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.errors import InvalidRequest
from inline_core.families.flow_pipeline import FlowImagePipeline
from inline_core.families.flux2.lora import read_lora
from inline_core.families.flux2.request import (
    MAX_REFERENCE_PIXELS,
    PIXELS_PER_TOKEN,
    Flux2Request,
    new_request,
    reference_size,
)
from inline_core.families.flux2.ring import ROUTE
from inline_core.families.flux2.shift import empirical_mu
from inline_core.families.flux2.split import tokens_refusal
from inline_core.families.flux2.vae import Flux2VAE, unpatchify
from inline_core.families.flux2.variants import loaded_variant
from inline_core.families.ulysses_ring import route_split

REFERENCE_TIME = 10  # reference image i sits at time 10 + 10 i of the positions


def grid_ids(h: int, w: int, t: int = 0) -> torch.Tensor:
    """(h*w, 4) positions (t, row, column, 0) of a token grid."""
    return torch.cartesian_prod(
        torch.tensor([t]), torch.arange(h), torch.arange(w), torch.arange(1)
    )


def text_ids(length: int) -> torch.Tensor:
    return torch.cartesian_prod(
        torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(length)
    )


def batched(ids: torch.Tensor, rows: int) -> torch.Tensor:
    """(tokens, 4) positions -> (rows, tokens, 4), one set for every row."""
    return ids.unsqueeze(0).expand(rows, -1, -1)


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(1, C, h, w) -> (1, h*w, C)."""
    b, c, h, w = latents.shape
    return latents.reshape(b, c, h * w).permute(0, 2, 1)


def unpack(packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
    b, _tokens, c = packed.shape
    return packed.permute(0, 2, 1).reshape(b, c, h, w)


class Flux2DenoisePipeline(FlowImagePipeline[Flux2Request]):
    """The transformer and its schedule: requests come with their conditioning and leave as
    latents."""

    preview_name = "flux2"

    def __init__(self, *, transformer: nn.Module, **kwargs: Any) -> None:
        super().__init__(transformer=transformer, read_lora=read_lora, **kwargs)
        config = cast(Any, transformer).config
        self.channels = int(config.in_channels)
        # The variant it was built for: every request guides as the model does, whichever
        # path built it (the node's, `sample`'s, a rank's).
        self.variant = loaded_variant(config)

    def request(self, **kwargs: Any) -> Flux2Request:
        return new_request(self.model_key, self.variant, **kwargs)

    # -- worker-group split (components.step.SupportsSplitNotice) ------------------------------

    def split_by(self, engine: str, degrees: Mapping[str, int], /) -> None:
        """Under Ring, the blocks' attention runs over the shared masked ring (`ring.py`)."""
        if engine != "cache-dit":
            raise ValueError(f"FLUX.2 splits with cache-dit, not {engine}")
        route_split(ROUTE, self.transformer, degrees)

    # -- what the full pipeline adds ---------------------------------------------------------------

    def _encode_prompts(self, state: Flux2Request) -> None:
        if state.positive is None or (state.cfg and state.negative is None):
            raise InvalidRequest("a request for the denoiser alone needs its prompts encoded")

    def _encode_references(self, state: Flux2Request) -> list[torch.Tensor]:
        if state.reference_images:
            raise InvalidRequest("the denoiser alone has no VAE to encode reference images with")
        return []

    # -- step protocol ---------------------------------------------------------------------------

    def prepare_encode(self, state: Flux2Request, /) -> Flux2Request:
        with torch.inference_mode():
            self._encode_prompts(state)
            dtype = cast(torch.Tensor, cast(Conditioning, state.positive).value).dtype
            references = self._encode_references(state)
            if references:
                state.reference_shapes = tuple((r.shape[2], r.shape[3]) for r in references)
                state.references = torch.cat([pack(r) for r in references], dim=1).to(self.device)
            refuse_unshared(state)
            h, w = state.latent_size
            # The shift of the schedule its steps are cut from (diffusers' img2img: the whole).
            mu = empirical_mu(h * w, state.schedule_steps)
            self._start(state, (self.channels, h, w), dtype, mu)
        return state

    def _guide(self, pred: torch.Tensor, negative: torch.Tensor, guidance: float) -> torch.Tensor:
        return negative + guidance * (pred - negative)

    def _pack(self, latents: torch.Tensor) -> torch.Tensor:
        return pack(latents)

    def _unpack(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """The VAE's normalised patchified grid, (1, C, h, w)."""
        return unpack(packed, h, w)

    def _preview(self, packed: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """The 32 VAE channels at twice the grid, normalised (ComfyUI's `Flux2` preview)."""
        return unpatchify(unpack(packed, h, w))

    def _release(self, state: Flux2Request) -> None:
        super()._release(state)
        state.references = None

    def _forward(self, rows: list[tuple[Flux2Request, Conditioning]]) -> torch.Tensor:
        first = rows[0][0]
        h, w = first.latent_size
        tokens = h * w
        hidden = [self._latents_in(s).value for s, _c in rows]
        if first.references is not None:
            hidden = [
                torch.cat([cast(torch.Tensor, x), cast(torch.Tensor, s.references)], dim=1)
                for x, (s, _c) in zip(hidden, rows, strict=True)
            ]
        ids = [grid_ids(h, w)]
        for i, (rh, rw) in enumerate(first.reference_shapes):
            ids.append(grid_ids(rh, rw, REFERENCE_TIME + REFERENCE_TIME * i))
        timestep = torch.cat(
            [cast(FlowMatchSchedule, s.schedule).model_timestep(s.step_index) for s, _c in rows]
        )
        text = torch.stack([cast(torch.Tensor, c.value) for _s, c in rows])
        with self._on_device(rows):
            out = cast(
                torch.Tensor,
                self.transformer(
                    hidden_states=torch.cat(cast(list[torch.Tensor], hidden)).to(self.dtype),
                    timestep=timestep.to(self.device, self.dtype),
                    guidance=self._guidance(rows),
                    encoder_hidden_states=text.to(self.device, self.dtype),
                    # Batched, as the pipeline passes them: a context-parallel split shards
                    # the positions only when they carry the batch axis (diffusers' `_cp_plan`).
                    txt_ids=batched(text_ids(text.shape[1]), len(rows)).to(self.device),
                    img_ids=batched(torch.cat(ids), len(rows)).to(self.device),
                    return_dict=False,
                )[0],
            )
        return out[:, :tokens]

    def _guidance(self, rows: list[tuple[Flux2Request, Conditioning]]) -> torch.Tensor | None:
        """dev's embedded guidance, each row its request's (float32, as the pipeline passes
        it); klein takes none."""
        if not rows[0][0].embedded_guidance:
            return None
        values = [s.guidance for s, _c in rows]
        return torch.tensor(values, dtype=torch.float32, device=self.device)


class Flux2StepPipeline(Flux2DenoisePipeline):
    """Drives one loaded FLUX.2 klein stack, prompt (and reference images) to image."""

    _encoder_modules = ["text_encoder.model"]
    _vae_modules = ["vae.autoencoder"]

    def __init__(self, *, text_encoder: ChatPromptEncoder, vae: Flux2VAE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text_encoder = text_encoder
        self.vae = vae

    def _decoder(self) -> Flux2VAE:
        return self.vae

    def _encode_prompts(self, state: Flux2Request) -> None:
        if state.positive is None:
            state.positive = self.text_encoder.encode(state.prompt)
        if state.cfg and state.negative is None:
            state.negative = self.text_encoder.encode("")  # the pipeline's negative prompt

    def _encode_references(self, state: Flux2Request) -> list[torch.Tensor]:
        return [
            cast(torch.Tensor, self.vae.encode_pixels(reference_pixels(i)).value)
            for i in state.reference_images
        ]


def refuse_unshared(state: Flux2Request) -> None:
    """A rank's guard behind the check at submit (`Flux2Family.unsplittable`): image tokens the
    ranks cannot share, counted once the reference images are encoded (a reference's size may be
    known only now), are an `InvalidRequest` saying why and what to change, before cache-dit's
    own "must be divisible by mesh size"."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return
    ranks = dist.get_world_size()  # ulysses x ring: every rank shards tokens
    if why := tokens_refusal(state.latent_size, state.reference_shapes, ranks):
        raise InvalidRequest(why)


def reference_pixels(image: Any) -> torch.Tensor:
    """A reference image as the pipeline prepares it: scaled down to at most 1024x1024 pixels,
    cropped to multiples of 16 (`reference_size`, which the split's check at submit counts)."""
    from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor

    processor = cast(Any, Flux2ImageProcessor(vae_scale_factor=PIXELS_PER_TOKEN))
    img = cast(Image.Image, image)
    width, height = reference_size(*img.size)
    if img.width * img.height > MAX_REFERENCE_PIXELS:
        img = processor._resize_to_target_area(img, MAX_REFERENCE_PIXELS)
    return cast(
        torch.Tensor,
        processor.preprocess(img, height=height, width=width, resize_mode="crop"),
    )


__all__ = [
    "Flux2DenoisePipeline",
    "Flux2StepPipeline",
    "empirical_mu",
    "reference_pixels",
    "refuse_unshared",
]
