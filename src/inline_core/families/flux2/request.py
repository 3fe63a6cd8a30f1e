"""One FLUX.2 render's state, and the checks a request must pass (torch-free).

Its input fields cross into a worker group as they are (`parallel/wire.py`); the fields marked
`LOCAL` are made where the request runs. FLUX.2's transformer takes one batched tensor and one
set of positions for every row, so requests share a forward only when their latents and their
reference images' latents have one shape (`batch_key`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest
from inline_core.parallel.wire import LOCAL
from inline_core.runtime.step_cache import StepCacheSettings

# Pixels per transformer token along a side: the VAE's 8, then the 2x2 patch.
PIXELS_PER_TOKEN = 16
TEXT_TOKENS = 512  # prompts are padded to this many tokens
# The largest reference image, in pixels: a larger one is scaled down to this area (diffusers').
MAX_REFERENCE_PIXELS = 1024 * 1024
MIN_REFERENCE_SIDE = 64  # the pipeline's limits on a reference image
MAX_REFERENCE_RATIO = 8


@dataclass(eq=False)
class Flux2Request:
    prompt: str
    width: int
    height: int
    steps: int
    guidance: float
    seed: int
    guided: bool = False  # a base model: guidance above 1 runs the empty prompt too
    image: Any = None  # reference images (PIL), in order
    image2: Any = None
    image3: Any = None
    sampler: str = "euler"
    sigma_schedule: str = "simple"
    batch_size: int = 1  # a latent batch's noise is drawn at once, as diffusers draws it
    batch_index: int = 0
    positive: Conditioning | None = None
    negative: Conditioning | None = None
    loras: LoraStack = ()  # applied to this request's rows of each forward, never merged
    step_cache: StepCacheSettings | None = None
    model_key: Hashable = field(default="", metadata=LOCAL)
    step_index: int = field(default=0, metadata=LOCAL)
    schedule: Any = field(default=None, metadata=LOCAL)  # its private FlowMatchSchedule
    latents: Latents | None = field(default=None, metadata=LOCAL)  # packed (1, tokens, C)
    references: Any = field(default=None, metadata=LOCAL)  # packed (1, tokens, C), or None
    reference_shapes: tuple[tuple[int, int], ...] = field(default=(), metadata=LOCAL)
    cache: Any = field(default=None, metadata=LOCAL)  # its `stepcache.rows.RequestCache`

    @property
    def reference_images(self) -> list[Any]:
        return [i for i in (self.image, self.image2, self.image3) if i is not None]

    @property
    def cfg(self) -> bool:
        return self.guided and self.guidance > 1

    @property
    def step_count(self) -> int:
        return self.steps if self.schedule is None else int(self.schedule.step_count)

    @property
    def done(self) -> bool:
        return self.schedule is not None and self.step_index >= self.step_count

    @property
    def latent_size(self) -> tuple[int, int]:
        """The transformer's token grid (rows, columns)."""
        return self.height // PIXELS_PER_TOKEN, self.width // PIXELS_PER_TOKEN

    @property
    def batch_key(self) -> Hashable:
        # One batched tensor and one set of positions per forward.
        return ("flux-2", self.model_key, self.cfg, self.latent_size, self.reference_shapes)

    @property
    def tokens(self) -> int:
        # Image tokens, as the batch budget counts them: its latents' and its references'.
        h, w = self.latent_size
        references = sum(a * b for a, b in self.reference_shapes)
        return (h * w + references) * (2 if self.cfg else 1)


def reference_refusal(port: str, width: int, height: int) -> str | None:
    """Why a reference image of this size cannot be used (None: it can), as the pipeline
    checks it."""
    if min(width, height) < MIN_REFERENCE_SIDE:
        return (
            f"the {port} reference image is {width}x{height}: both sides must be at least "
            f"{MIN_REFERENCE_SIDE} pixels"
        )
    if max(width / height, height / width) > MAX_REFERENCE_RATIO:
        return (
            f"the {port} reference image is {width}x{height}: its aspect ratio must be at most "
            f"{MAX_REFERENCE_RATIO}:1"
        )
    return None


def new_request(model_key: Hashable, **kwargs: Any) -> Flux2Request:
    state = Flux2Request(**kwargs, model_key=model_key)
    if state.width % PIXELS_PER_TOKEN or state.height % PIXELS_PER_TOKEN:
        raise InvalidRequest(f"width and height must be multiples of {PIXELS_PER_TOKEN}")
    if not 0 <= state.batch_index < state.batch_size:
        raise InvalidRequest(
            f"batch index {state.batch_index} is outside 0..{state.batch_size - 1}"
        )
    ports = ("image", "image2", "image3")
    for port, image in zip(ports, (state.image, state.image2, state.image3), strict=True):
        size: object = getattr(image, "size", None)
        if not isinstance(size, tuple):
            continue
        width, height = cast(tuple[int, int], size)
        if why := reference_refusal(port, width, height):
            raise InvalidRequest(why)
    return state
