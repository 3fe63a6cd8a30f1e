"""One FLUX.2 render's state, and the checks a request must pass (torch-free).

The fields every flow image request has are `FlowImageRequest`'s; FLUX.2 adds its reference
images. Its transformer takes one batched tensor and one set of positions for every row, so
requests share a forward only when their latents and their reference images' latents have one
shape (`batch_key`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.errors import InvalidRequest
from inline_core.families.flow_request import PIXELS_PER_TOKEN, FlowImageRequest
from inline_core.families.flux2.variants import Flux2Variant
from inline_core.parallel.wire import LOCAL

TEXT_TOKENS = 512  # prompts are padded to this many tokens
# The largest reference image, in pixels: a larger one is scaled down to this area (diffusers').
MAX_REFERENCE_PIXELS = 1024 * 1024
MIN_REFERENCE_SIDE = 64  # the pipeline's limits on a reference image
MAX_REFERENCE_RATIO = 8
REFERENCE_PORTS = ("image", "image2", "image3")


@dataclass(eq=False)
class Flux2Request(FlowImageRequest):
    guided: bool = False  # a base model: guidance above 1 runs the empty prompt too
    embedded_guidance: bool = False  # dev: guidance goes into the transformer, one forward
    image: Any = None  # reference images (PIL), in order
    image2: Any = None
    image3: Any = None
    references: Any = field(default=None, metadata=LOCAL)  # packed (1, tokens, C), or None
    reference_shapes: tuple[tuple[int, int], ...] = field(default=(), metadata=LOCAL)

    @property
    def reference_images(self) -> list[Any]:
        return [i for i in (self.image, self.image2, self.image3) if i is not None]

    @property
    def cfg(self) -> bool:
        return self.guided and self.guidance > 1

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


def reference_size(width: int, height: int) -> tuple[int, int]:
    """The size a reference image of `width`x`height` is encoded at, as the pipeline prepares it:
    scaled down to at most `MAX_REFERENCE_PIXELS` (diffusers' `_resize_to_target_area`), then
    cropped to multiples of 16 pixels. One token each 16x16 pixels of it."""
    if width * height > MAX_REFERENCE_PIXELS:
        scale = math.sqrt(MAX_REFERENCE_PIXELS / (width * height))
        width, height = int(width * scale), int(height * scale)
    return (
        width // PIXELS_PER_TOKEN * PIXELS_PER_TOKEN,
        height // PIXELS_PER_TOKEN * PIXELS_PER_TOKEN,
    )


def new_request(
    model_key: Hashable, variant: Flux2Variant | None = None, **kwargs: Any
) -> Flux2Request:
    """A checked request; with the model's `variant`, guided as it guides unless `kwargs` say."""
    fields: dict[str, Any] = {} if variant is None else dict(variant.request_fields())
    state = Flux2Request(**(fields | kwargs), model_key=model_key)
    state.check()
    images = (state.image, state.image2, state.image3)
    for port, image in zip(REFERENCE_PORTS, images, strict=True):
        size: object = getattr(image, "size", None)
        if not isinstance(size, tuple):
            continue
        width, height = cast(tuple[int, int], size)
        if why := reference_refusal(port, width, height):
            raise InvalidRequest(why)
    return state


__all__ = [
    "PIXELS_PER_TOKEN",
    "Flux2Request",
    "new_request",
    "reference_refusal",
    "reference_size",
]
