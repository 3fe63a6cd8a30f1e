"""The refiner's side of an SDXL render: its UNet, its prompts and its size conditioning.

Its one encoder (OpenCLIP-G) reads the request's prompts at the request's layer, pooled as the
base's second tower is; each prompt carries its aesthetic score (6, and 2.5 for the negative),
as ComfyUI's conditioning carries `aesthetic_score` and diffusers' refiner pipeline adds it. Its
size conditioning is five numbers: height, width, the crop (0, 0) and that score. LoRAs and the
base's sampling state do not reach it: a request's LoRAs adapt the base alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.clip_prompt import (
    ClipConditioning,
    ClipEmbedding,
    ClipPromptEncoder,
)
from inline_core.families.sdxl.refiner import AESTHETIC_SCORE, NEGATIVE_AESTHETIC_SCORE

if TYPE_CHECKING:
    from inline_core.families.sdxl.request import SDXLRequest


@dataclass(frozen=True)
class ScoredConditioning(ClipConditioning):
    """A refiner prompt's states with the aesthetic score its size conditioning takes."""

    aesthetic: float


class RefinerStage:
    def __init__(self, unet: nn.Module, encoder: ClipPromptEncoder) -> None:
        self.unet = unet
        self.encoder = encoder

    def encode(self, state: SDXLRequest, embeddings: Mapping[str, ClipEmbedding]) -> None:
        """The request's prompts on the refiner's encoder, each with its score. `embeddings`
        are the base's (CLIP-L's and OpenCLIP-G's vectors): the refiner reads G's."""
        own = {n: ClipEmbedding(e.identity, e.vectors[-1:]) for n, e in embeddings.items()}
        state.refiner_positive = self._scored(state.prompt, state, own, AESTHETIC_SCORE)
        if state.cfg:
            state.refiner_negative = self._scored(
                state.negative_prompt, state, own, NEGATIVE_AESTHETIC_SCORE
            )

    def _scored(
        self,
        prompt: str,
        state: SDXLRequest,
        embeddings: Mapping[str, ClipEmbedding],
        score: float,
    ) -> Conditioning:
        encoded = self.encoder.encode_at(prompt, state.clip_skip, (), embeddings)
        value = cast(ClipConditioning, encoded.value)
        scored = ScoredConditioning(value.hidden, value.pooled, score)
        return Conditioning(scored, tokens=encoded.tokens)


def enter_refiner(state: SDXLRequest) -> None:
    """From the switch on, the request's prompts are the refiner's."""
    state.positive, state.negative = state.refiner_positive, state.refiner_negative


def refiner_sizes(state: SDXLRequest, value: ClipConditioning) -> list[float]:
    """A refiner row's size conditioning: the latent's size, no crop, the prompt's score."""
    if not isinstance(value, ScoredConditioning):
        raise RuntimeError("a refiner forward over a prompt its encoder did not score")
    return [state.height, state.width, 0, 0, value.aesthetic]
