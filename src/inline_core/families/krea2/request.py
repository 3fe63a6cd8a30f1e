"""One Krea 2 render's state, and the checks a request must pass (torch-free). Its transformer
takes one batched tensor and one set of positions: requests of one latent shape share a
forward."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest
from inline_core.parallel.wire import LOCAL

PIXELS_PER_TOKEN = 16  # the VAE's 8, then the 2x2 patch


@dataclass(eq=False)
class Krea2Request:
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float  # Krea's: `cond + g * (cond - uncond)`, on above 0
    seed: int
    negative_prompt: str = ""
    distilled: bool = False  # Turbo: a fixed shift
    text_layers: tuple[int, ...] = ()  # the Qwen3-VL hidden states its model reads
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    batch_size: int = 1
    batch_index: int = 0
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    loras: LoraStack = ()
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    schedule: Any = field(default=None, metadata=LOCAL)
    latents: Latents | None = field(default=None, metadata=LOCAL)  # packed (1, tokens, 64)

    @property
    def cfg(self) -> bool:
        return self.guidance > 0

    @property
    def step_count(self) -> int:
        return self.steps if self.schedule is None else int(self.schedule.step_count)

    @property
    def done(self) -> bool:
        return self.schedule is not None and self.step_index >= self.step_count

    @property
    def latent_size(self) -> tuple[int, int]:
        return self.height // PIXELS_PER_TOKEN, self.width // PIXELS_PER_TOKEN

    @property
    def batch_key(self) -> Hashable:
        return ("krea-2", self.model_key, self.cfg, self.latent_size)

    @property
    def tokens(self) -> int:
        h, w = self.latent_size
        return h * w * (2 if self.cfg else 1)


def new_request(model_key: Hashable, **kwargs: Any) -> Krea2Request:
    state = Krea2Request(**kwargs, model_key=model_key)
    if state.width % PIXELS_PER_TOKEN or state.height % PIXELS_PER_TOKEN:
        raise InvalidRequest(f"width and height must be multiples of {PIXELS_PER_TOKEN}")
    if not 0 <= state.batch_index < state.batch_size:
        raise InvalidRequest(
            f"batch index {state.batch_index} is outside 0..{state.batch_size - 1}"
        )
    return state
