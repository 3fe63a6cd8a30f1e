"""One Chroma render's state, and the checks a request must pass (torch-free): the layer's flow
image request (`families/flow_request.py`) with Chroma's negative prompt and the `sample`
primitive's `denoise` and start latents."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from inline_core.components.interfaces import Latents
from inline_core.families.flow_request import FlowImageRequest

LATENT_FACTOR = 8  # the FLUX VAE
PATCH = 2  # latents are packed 2x2 into the transformer's tokens


@dataclass(eq=False)
class ChromaRequest(FlowImageRequest):
    # guidance: true classifier-free guidance, on above 1 (diffusers' guidance_scale)
    negative_prompt: str = ""
    denoise: float = 1.0
    start: Latents | None = None

    @property
    def cfg(self) -> bool:
        return self.guidance > 1

    @property
    def latent_pixels(self) -> tuple[int, int]:
        """The VAE latent's (height, width): twice the token grid."""
        h, w = self.latent_size
        return h * PATCH, w * PATCH

    @property
    def batch_key(self) -> Hashable:
        # One batched tensor per forward: only requests of one latent shape share it.
        return ("chroma", self.model_key, self.cfg, self.latent_size)


def new_request(model_key: Hashable, **kwargs: Any) -> ChromaRequest:
    state = ChromaRequest(**kwargs, model_key=model_key)
    state.check()
    return state
