"""One Chroma render's state, and the checks a request must pass (torch-free)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.errors import InvalidRequest
from inline_core.parallel.wire import LOCAL

LATENT_FACTOR = 8  # the FLUX VAE
PATCH = 2  # latents are packed 2x2 into the transformer's tokens


@dataclass(eq=False)
class ChromaRequest:
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float  # true classifier-free guidance, on above 1 (diffusers' guidance_scale)
    seed: int
    negative_prompt: str = ""
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    denoise: float = 1.0
    start: Latents | None = None
    batch_size: int = 1
    batch_index: int = 0
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    schedule: Any = field(default=None, metadata=LOCAL)
    latents: Latents | None = field(default=None, metadata=LOCAL)  # packed (1, tokens, 64)

    @property
    def cfg(self) -> bool:
        return self.guidance > 1

    @property
    def step_count(self) -> int:
        return self.steps if self.schedule is None else int(self.schedule.step_count)

    @property
    def done(self) -> bool:
        return self.schedule is not None and self.step_index >= self.step_count

    @property
    def latent_size(self) -> tuple[int, int]:
        return self.height // LATENT_FACTOR, self.width // LATENT_FACTOR

    @property
    def batch_key(self) -> Hashable:
        # One batched tensor per forward: only requests of one latent shape share it.
        return ("chroma", self.model_key, self.cfg, self.latent_size)

    @property
    def tokens(self) -> int:
        h, w = self.latent_size
        return (h // PATCH) * (w // PATCH) * (2 if self.cfg else 1)


def new_request(model_key: Hashable, **kwargs: Any) -> ChromaRequest:
    state = ChromaRequest(**kwargs, model_key=model_key)
    multiple = LATENT_FACTOR * PATCH
    if state.width % multiple or state.height % multiple:
        raise InvalidRequest(f"width and height must be multiples of {multiple}")
    if not 0 <= state.batch_index < state.batch_size:
        raise InvalidRequest(
            f"batch index {state.batch_index} is outside 0..{state.batch_size - 1}"
        )
    return state
