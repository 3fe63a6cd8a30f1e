"""One Qwen-Image render's state, and the checks a request must pass (torch-free).

The state is what `QwenImagePipeline` (ours, `pipeline.py`) steps. Its input fields cross into a
worker group as they are (`parallel/wire.py`); the fields marked `LOCAL` are made where it runs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest
from inline_core.families.flow_request import FlowSteps
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, cfg_pp_unguided
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.step_cache import StepCacheSettings

# Pixels per latent cell along a side (the VAE's 8, packed 2x2 into one token): sizes are
# multiples of it.
LATENT_FACTOR = 8
PATCH = 2
MULTIPLE = LATENT_FACTOR * PATCH
NATIVE_SIZE = 1328
MAX_IMAGES = 3
# The areas the edit pipeline resizes each reference image to: what the text encoder's vision
# tower sees, and what the VAE encodes (diffusers' `CONDITION_IMAGE_SIZE`, `VAE_IMAGE_SIZE`).
CONDITION_AREA = 384 * 384
REFERENCE_AREA = 1024 * 1024
OUTPUT_AREA = 1024 * 1024  # an edit's default output size


def area_size(area: int, ratio: float, multiple: int = 32) -> tuple[int, int]:
    """(width, height) of about `area` pixels at `ratio` (width / height), each rounded to
    `multiple`: diffusers' `calculate_dimensions` for the edit pipelines."""
    width = math.sqrt(area * ratio)
    height = width / ratio
    return round(width / multiple) * multiple, round(height / multiple) * multiple


def edit_size(image_size: tuple[int, int]) -> tuple[int, int]:
    """The edit pipeline's output size for a reference image of `image_size`: a megapixel at
    its aspect ratio, down to a multiple of 16."""
    width, height = area_size(OUTPUT_AREA, image_size[0] / image_size[1])
    return width // MULTIPLE * MULTIPLE, height // MULTIPLE * MULTIPLE


def reference_size(image_size: tuple[int, int]) -> tuple[int, int]:
    """(width, height) a reference image is encoded by the VAE at."""
    return area_size(REFERENCE_AREA, image_size[0] / image_size[1])


def condition_size(image_size: tuple[int, int]) -> tuple[int, int]:
    """(width, height) a reference image is shown to the text encoder's vision tower at."""
    return area_size(CONDITION_AREA, image_size[0] / image_size[1])


@dataclass(eq=False)
class QwenImageRequest(FlowSteps):  # steps, and a grid of MULTIPLE (16) pixels a token
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float  # diffusers' `true_cfg_scale`: above 1, guided by the negative prompt
    seed: int
    negative_prompt: str = ""
    images: tuple[Any, ...] = ()  # the edit's reference images (PIL), one to three
    shift: float | None = None  # a fixed flow shift; None: the model's own (dynamic) shift
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    loras: LoraStack = ()  # applied to this request's rows of each forward, never merged
    step_cache: StepCacheSettings | None = None  # DBCache on its own rows of each forward
    model_key: Hashable = field(default="", metadata=LOCAL)
    edit: bool = field(default=False, metadata=LOCAL)  # the model edits (takes references)
    step_index: int = field(default=0, metadata=LOCAL)
    schedule: Any = field(default=None, metadata=LOCAL)  # its private FlowMatchSchedule
    latents: Latents | None = field(default=None, metadata=LOCAL)  # packed (1, tokens, 64)
    references: Any = field(default=None, metadata=LOCAL)  # packed reference latents
    positive: Conditioning | None = field(default=None, metadata=LOCAL)
    negative: Conditioning | None = field(default=None, metadata=LOCAL)
    cache: Any = field(default=None, metadata=LOCAL)  # its `stepcache.rows.RequestCache`
    # This step's unconditional prediction, for a CFG++ sampler (None: not one, or unguided).
    uncond: Any = field(default=None, metadata=LOCAL)

    @property
    def cfg(self) -> bool:
        return self.guidance > 1

    @property
    def cfg_pp(self) -> bool:
        """Whether its sampler steps along the unconditional prediction (CFG++)."""
        return self.sampler in CFG_PP_SAMPLERS

    @property
    def image_shapes(self) -> tuple[tuple[int, int, int], ...]:
        """The transformer's `img_shapes` of one row: the output, then each reference."""
        h, w = self.latent_size
        shapes = [(1, h, w)]
        for image in self.images:
            rw, rh = reference_size(image.size)
            shapes.append((1, rh // MULTIPLE, rw // MULTIPLE))
        return tuple(shapes)

    @property
    def batch_key(self) -> Hashable:
        # Rows of one forward share their image shapes (the transformer's rotary positions are
        # its first row's) and whether they are guided; prompts of any length pad with a mask.
        return ("qwen-image", self.model_key, self.cfg, self.image_shapes)

    @property
    def image_tokens(self) -> int:
        return sum(h * w for _f, h, w in self.image_shapes)

    @property
    def tokens(self) -> int:
        return self.image_tokens * (2 if self.cfg else 1)


def new_request(model_key: Hashable, edit: bool, **kwargs: Any) -> QwenImageRequest:
    """A request state for a text-to-image (`edit` False) or edit model (checks sizes, images)."""
    state = QwenImageRequest(**kwargs, model_key=model_key, edit=edit)
    if state.width % MULTIPLE or state.height % MULTIPLE or state.width <= 0 or state.height <= 0:
        raise InvalidRequest(f"width and height must be positive multiples of {MULTIPLE}")
    if state.images and not edit:
        raise InvalidRequest("a text-to-image Qwen-Image model takes no reference image")
    if edit and not state.images:
        raise InvalidRequest("a Qwen-Image-Edit model needs a reference image")
    if len(state.images) > MAX_IMAGES:
        raise InvalidRequest(f"at most {MAX_IMAGES} reference images")
    if state.steps < 1:
        raise InvalidRequest("steps must be at least 1")
    if state.cfg_pp and not state.cfg:
        raise InvalidRequest(cfg_pp_unguided(state.sampler))
    return state
