"""Engine handles: the values on the `model`, `vae`, `text-encoder`, `conditioning`, `latent` and
`lora` sockets of a primitive graph (torch-free); a model handle may carry a control, a latent a
noise mask.

They are small frozen records, never takes, and each names the family whose files it holds: the
low-level vocabulary dispatches by it. Loader handles name files, not weights: the weights stay in
the server's resident cache (evicted under its memory budget, reloaded on demand), so the node
output cache may hold handles for many runs without pinning a model in memory. Conditioning and
latents carry their (small) tensors inside the opaque component wrappers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.diffusion.adapters.stack import LoraStack, LoraUse
from inline_core.models.source import Source


@dataclass(frozen=True)
class ModelHandle:
    """`load/diffusion-model`: a family's transformer and the scheduler config it samples with."""

    family: str
    name: str  # the catalog name in diffusion_models/
    transformer: Source
    scheduler: Source | None  # None: the family's own scheduler config
    loras: LoraStack = ()  # `load/lora` nodes chained after the loader, in order
    control: ControlHandle | None = None  # `load/controlnet` on the model's way


@dataclass(frozen=True, eq=False)
class ControlHandle:
    """`load/controlnet`: a control model (its family's record of the file and strength), the
    control image, and the VAE that encodes it at the sampled latent's size."""

    family: str
    use: Any
    image: Any  # a PIL image; None: mid-gray (a control model that inpaints)
    vae: VAEHandle
    name: str  # its catalog name in controlnet/
    mask: Any = None  # an `L` image, white repaints: a control model that inpaints
    inpaint_image: Any = None  # the image it inpaints (a PIL image; None: mid-gray)


@dataclass(frozen=True)
class LoraHandle:
    """`input/lora`: one LoRA of a high-level node's stack, for the family whose naming it has."""

    family: str
    use: LoraUse
    # Which model of a two-model stack it adapts (Wan 2.2 A14B's experts): "both", "high" (the
    # first, high-noise one) or "low"; a one-model stack takes "both" only.
    expert: str = "both"
    # `load/lora` at submit: the model it adds to (its file says what `sample` may ask of it).
    model: ModelHandle | None = field(default=None, compare=False)


@dataclass(frozen=True)
class VAEHandle:
    """`load/vae`: a VAE, as the family that takes it decodes with it."""

    family: str
    name: str
    source: Source


@dataclass(frozen=True)
class TextEncoderHandle:
    """`load/text-encoder`: a text encoder and its tokenizer, encoded the way its family does."""

    family: str
    name: str
    encoder: Source
    tokenizer: Source
    # The other families that take the file, when the loader was not told whose reading it is
    # (its `type`): a prompt is encoded their ways too, and `sample` takes its model's. At
    # submit, cut to the families the run's samples read (`LoadTextEncoder.fitted`).
    also: tuple[TextEncoderHandle, ...] = ()

    @property
    def readers(self) -> tuple[str, ...]:
        """The families whose reading its conditionings carry."""
        return (self.family, *(h.family for h in self.also))


@dataclass(frozen=True, eq=False)
class ConditioningHandle:
    """`encode/text`: one prompt, encoded."""

    family: str
    conditioning: Conditioning
    width: int  # the encoder's hidden size: the caption width a transformer must take
    encoder: str  # which text encoder made it (its catalog name), for error messages
    # The guidance the model embeds (`conditioning/guidance`, ComfyUI's FluxGuidance); None:
    # the model's own default.
    guidance: float | None = None
    # The same prompt as the encoder's other families read it (`TextEncoderHandle.also`).
    readings: Mapping[str, ConditioningHandle] = field(
        default_factory=dict[str, "ConditioningHandle"]
    )

    def read_for(self, family: str) -> ConditioningHandle | None:
        """The prompt as `family` reads it; None: it was not encoded that way."""
        return self if family == self.family else self.readings.get(family)


@dataclass(frozen=True, eq=False)
class LatentHandle:
    """`latent/empty`, `sample`, `vae/encode`: a batch of latent images of one pixel size.

    `samples` holds one `(1, C, h, w)` latent per batch item; None is an empty latent (all zeros,
    as ComfyUI's EmptyLatentImage), which `sample` replaces with seeded noise.
    """

    width: int  # pixels
    height: int
    batch: int
    samples: tuple[Latents, ...] | None = None
    # How the latents were made (seed, steps, sampler, ...): carried onto the decoded takes.
    info: Mapping[str, Any] = field(default_factory=dict[str, Any])
    # Where `sample` repaints (an `L` image, white repaints, gray blends; any size): ComfyUI's
    # noise mask (`latent/noise-mask`, `vae/encode-inpaint`). None: everywhere.
    noise_mask: Any = None
    # `vae/encode`'s image size before its centre crop (None: not encoded from an image).
    encoded_from: tuple[int, int] | None = None
    # The size of the image the noise mask covers, when it covers the image before the encode's
    # crop (InpaintModelConditioning's): `sample` resizes the mask to it and crops it as the
    # encode cropped the image. None: the mask is stretched over the latent.
    noise_mask_on: tuple[int, int] | None = None

    @property
    def empty(self) -> bool:
        return self.samples is None
