"""Device-agnostic component interfaces (torch-free).

A model family lowers its node onto these pieces; their implementations (which import torch) live
in the shared diffusers layer (`diffusion/`) and the families' packages. Tensors cross these
interfaces only inside the opaque `Conditioning` and `Latents` wrappers, so code above this layer
never touches them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Conditioning:
    """A prompt as one text encoder encoded it. Only a denoiser of the same family reads `value`."""

    value: Any
    tokens: int  # caption length in tokens


@dataclass(frozen=True)
class Latents:
    """A latent image (or batch of them). Only the family's scheduler, denoiser and VAE read it."""

    value: Any
    shape: tuple[int, ...]


class TextEncoder(Protocol):
    def encode(self, prompt: str, /) -> Conditioning: ...


class Scheduler(Protocol):
    """One request's private noise schedule: it owns the step arithmetic, not the loop."""

    @property
    def step_count(self) -> int: ...

    def model_timestep(self, index: int, /) -> Any:
        """The timestep the denoiser sees at step `index`."""
        ...

    def step(self, index: int, noise_pred: Any, latents: Latents, /) -> Latents:
        """Advance `latents` by step `index` given the denoiser's prediction."""
        ...


class Denoiser(Protocol):
    def predict(
        self,
        latents: Sequence[Latents],
        timesteps: Sequence[Any],
        conditioning: Sequence[Conditioning],
        /,
    ) -> list[Any]:
        """One forward over a batch of requests (one prediction per item, in order)."""
        ...


class VAE(Protocol):
    @property
    def spatial_factor(self) -> int:
        """Pixels per latent cell along each side."""
        ...

    @property
    def latent_channels(self) -> int: ...

    def encode(self, image: Any, generator: Any, /) -> Latents:
        """Encode an RGB image (already at the output size) into normalised latents."""
        ...

    def decode(self, latents: Latents, /) -> Any:
        """Decode normalised latents into an RGB image."""
        ...


class Sampler(Protocol):
    """What drives a step pipeline to completion (`sampling.BatchedSampler` implements it)."""

    def run(self, job: Any, /) -> Any: ...
