"""One Krea 2 render's state, and the checks a request must pass (torch-free). The fields every
flow image request has are `FlowImageRequest`'s; Krea 2 adds its negative prompt, its variant's
shift and text layers. Requests of one latent shape share a forward."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from inline_core.families.flow_request import FlowImageRequest

TEXT_TOKENS = 512  # every prompt is padded to this many tokens (its mask marks the real ones)


@dataclass(eq=False)
class Krea2Request(FlowImageRequest):
    # `guidance` is Krea's: `cond + g * (cond - uncond)`, on above 0.
    negative_prompt: str = ""
    distilled: bool = False  # Turbo: a fixed shift
    text_layers: tuple[int, ...] = ()  # the Qwen3-VL hidden states its model reads

    @property
    def cfg(self) -> bool:
        return self.guidance > 0

    @property
    def batch_key(self) -> Hashable:
        return ("krea-2", self.model_key, self.cfg, self.latent_size)


def new_request(model_key: Hashable, **kwargs: Any) -> Krea2Request:
    state = Krea2Request(**kwargs, model_key=model_key)
    state.check()
    return state
